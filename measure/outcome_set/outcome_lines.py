"""Outcome lines from the items and their answers per level, in the classifier's outcome format
(classifier/outcomes.py reads them), with the answers, token counts and logprobs beside the verdicts;
and the set's summary: accuracy per level and the share of items only a higher level gets right."""
from __future__ import annotations

from collections import defaultdict

ITEM_FIELDS = ("id", "family", "difficulty", "messages", "answer", "check")


def outcome_line(item: dict, by_level: dict[int, dict]) -> dict:
    """One item's line; `by_level` maps a level to its answer record (answering.record). The top-k
    logprobs are kept for the levels below the top only: a cascade reads the confidence of a tier it
    may escalate from, and the top tier's would be a third of the file."""
    levels = sorted(by_level)
    line = {k: item[k] for k in ITEM_FIELDS}
    line["outcomes"] = {str(lv): bool(by_level[lv]["correct"]) for lv in levels}
    line["answers"] = {str(lv): by_level[lv]["text"] for lv in levels}
    line["tokens"] = {str(lv): by_level[lv]["tokens"] for lv in levels}
    line["logprobs"] = {str(lv): by_level[lv]["logprobs"] for lv in levels}
    line["top_logprobs"] = {str(lv): by_level[lv]["top_logprobs"] for lv in levels[:-1]}
    return line


def outcome_lines(items: list[dict], answers: dict[int, dict[str, dict]]) -> list[dict]:
    """Lines for the items every level answered, in item order."""
    return [outcome_line(item, {lv: rows[item["id"]] for lv, rows in answers.items()})
            for item in items if all(item["id"] in rows for rows in answers.values())]


def _share(lines: list[dict], test) -> float:
    return round(sum(1 for line in lines if test(line["outcomes"])) / max(1, len(lines)), 4)


def summary(lines: list[dict]) -> dict:
    """Accuracy per level (overall, by difficulty, by family) and, for each pair of levels, the share
    the higher one gets right and the lower one wrong (the gain a router or cascade can recover)."""
    levels = sorted({lv for line in lines for lv in line["outcomes"]}, key=int)
    out = {"items": len(lines), "accuracy": {lv: _share(lines, lambda o, lv=lv: o[lv]) for lv in levels}}
    out["gain"] = {f"{lo}->{hi}": _share(lines, lambda o, lo=lo, hi=hi: o[hi] and not o[lo])
                   for i, lo in enumerate(levels) for hi in levels[i + 1:]}
    out["loss"] = {f"{lo}->{hi}": _share(lines, lambda o, lo=lo, hi=hi: o[lo] and not o[hi])
                   for i, lo in enumerate(levels) for hi in levels[i + 1:]}
    for key in ("difficulty", "family"):
        groups = defaultdict(list)
        for line in lines:
            groups[str(line[key])].append(line)
        out[f"accuracy_by_{key}"] = {g: {lv: _share(rows, lambda o, lv=lv: o[lv]) for lv in levels}
                                     for g, rows in sorted(groups.items())}
    out["mean_tokens"] = {lv: round(sum(line["tokens"][lv] for line in lines) / max(1, len(lines)), 1)
                          for lv in levels}
    return out
