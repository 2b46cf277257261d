"""Outcome rows: what a deployment learned about its own tiers, one JSON object per line.

    {"messages": [...] | "prompt": "...", "outcomes": {"1": false, "4": true}}

`outcomes` maps a tier level (1..4) to whether that tier's answer was good enough; any subset
of levels may be present. Each row becomes a training label, the cheapest level known to be
enough:
- some level passed: the lowest passing level L, when L is 1 or a lower level is known to
  fail (with {"1": false, "4": true} the label is 4: levels 2 and 3 are untested, and when
  unsure the rubric picks the higher tier); a row whose only passes have no known failure
  below them says nothing about cheaper tiers and is skipped;
- nothing passed: one level above the highest failure (capped at 4).
Outcome rows weigh OUTCOME_WEIGHT times a prior row in training: they describe this
deployment's tiers, the prior data only the rubric's.
"""
from __future__ import annotations

from pathlib import Path

from .dataset import read_jsonl

OUTCOME_WEIGHT = 3.0


def _levels(outcomes, where: str) -> dict[int, bool]:
    if not isinstance(outcomes, dict) or not outcomes:
        raise ValueError(f"{where}: 'outcomes' must be a non-empty object like {{\"1\": false, \"4\": true}}")
    levels = {}
    for key, value in outcomes.items():
        if str(key) not in ("1", "2", "3", "4") or not isinstance(value, bool):
            raise ValueError(f"{where}: outcomes keys must be tier levels 1..4 with true/false values, got {key!r}: {value!r}")
        levels[int(key)] = value
    return levels


def label_for(levels: dict[int, bool]) -> int | None:
    passed = [lvl for lvl, ok in levels.items() if ok]
    failed = [lvl for lvl, ok in levels.items() if not ok]
    if not passed:
        return min(4, max(failed) + 1)
    lowest = min(passed)
    if lowest == 1 or any(f < lowest for f in failed):
        return lowest
    return None


def parse_line(row, where: str) -> tuple[dict, dict[int, bool]]:
    """One outcome line's request and its outcomes by level, validated (ValueError names `where`)."""
    if not isinstance(row, dict):
        raise ValueError(f"{where}: an outcome line must be a JSON object")
    request = {k: row[k] for k in ("messages", "prompt") if k in row}
    if not isinstance(request.get("messages"), list) and not isinstance(request.get("prompt"), str):
        raise ValueError(f"{where}: needs 'messages' (a list) or 'prompt' (a string)")
    return request, _levels(row.get("outcomes"), where)


def read_outcome_lines(path: str | Path) -> tuple[list[dict], list[dict[int, bool]]]:
    """Each line's request and its outcomes by level, validated."""
    parsed = [parse_line(row, f"{path}:{n}") for n, row in enumerate(read_jsonl(path, need_label=False), 1)]
    return [r for r, _ in parsed], [lv for _, lv in parsed]


def read_outcomes(path: str | Path) -> tuple[list[dict], dict]:
    """Training rows (with `tier` and `weight`) from one outcome file, plus counts."""
    rows, skipped, lines = [], 0, 0
    for n, row in enumerate(read_jsonl(path, need_label=False), 1):
        lines += 1
        label = label_for(_levels(row.get("outcomes"), f"{path}:{n}"))
        if label is None:
            skipped += 1
            continue
        request = {k: row[k] for k in ("messages", "prompt") if k in row}
        rows.append({**request, "tier": label, "weight": OUTCOME_WEIGHT, "source": "outcomes"})
    return rows, {"file": str(path), "lines": lines, "rows": len(rows), "skipped_uninformative": skipped}


def outcome_row(request: dict, level: int, passed: bool, reference_level: int | None = None) -> dict:
    """One outcome line for a request judged on one tier level against the top tier's answer (the
    quality monitor's verdicts): the reference level counts as good enough, by construction."""
    body = {k: request[k] for k in ("messages", "prompt") if k in request}
    outcomes = {str(int(reference_level)): True} if reference_level and int(reference_level) > int(level) else {}
    return {**body, "outcomes": {str(int(level)): bool(passed), **outcomes}}
