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


def read_outcomes(path: str | Path) -> tuple[list[dict], dict]:
    """Training rows (with `tier` and `weight`) from one outcome file, plus counts."""
    rows, skipped = [], 0
    for n, row in enumerate(read_jsonl(path, need_label=False), 1):
        label = label_for(_levels(row.get("outcomes"), f"{path}:{n}"))
        if label is None:
            skipped += 1
            continue
        request = {k: row[k] for k in ("messages", "prompt") if k in row}
        rows.append({**request, "tier": label, "weight": OUTCOME_WEIGHT, "source": "outcomes"})
    return rows, {"file": str(path), "rows": len(rows), "skipped_uninformative": skipped}


def outcome_row(request: dict, level: int, passed: bool) -> dict:
    """One outcome line for a request judged on one tier level (the quality monitor's export)."""
    body = {k: request[k] for k in ("messages", "prompt") if k in request}
    return {**body, "outcomes": {str(int(level)): bool(passed)}}
