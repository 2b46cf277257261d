"""From each tenant's per-tier adjustment steps (shared in Redis) to its threshold shift.

A tier of level L receives the requests whose decided level is at most L (and above the
tier below). Lowering the threshold on P(level >= L+1) moves the borderline ones up to the
next tier, so `step` steps on tier L become `threshold_shift[L+1] = -step * step_size`.
Routing reads its tenant's shift (`shift_of`, from a dict swapped whole) on every request and
policies/decision.py adds it to the calibrated thresholds; no Redis on that path. A tenant's
verdicts set only its own steps, so no tenant moves another's routing. `shift` (per level, the
largest any tenant has) and the per-tier step gauges summarise them for the views.
"""
from __future__ import annotations

import logging

from . import metrics

log = logging.getLogger(__name__)


def _shift(steps: dict[str, int], levels: dict[str, int], step_size: float) -> dict[int, float]:
    shift: dict[int, float] = {}
    for name, step in steps.items():
        level = levels.get(name)
        if level is not None and level < 4:
            shift[level + 1] = round(shift.get(level + 1, 0.0) - step * step_size, 6)
    return shift


class Controller:
    def __init__(self):
        self.steps: dict[str, dict[str, int]] = {}  # tenant -> tier -> steps (only those above 0)
        self.shifts: dict[str, dict[int, float]] = {}  # tenant -> its threshold shift
        self.shift: dict[int, float] = {}  # per level, the largest shift of any tenant (views only)

    def shift_of(self, tenant: str) -> dict[int, float]:
        return self.shifts.get(tenant) or {}

    def as_view(self) -> dict:
        """The shifts as /v1/quality and the console show them (JSON keys are strings)."""
        return {"threshold_shift": {str(k): v for k, v in self.shift.items()},
                "threshold_shift_by_tenant": {tenant: {str(k): v for k, v in shift.items()}
                                              for tenant, shift in self.shifts.items()}}

    def update(self, steps: dict[str, dict[str, int]], tiers, step_size: float,
               thresholds: dict[int, float] | None) -> None:
        steps = {tenant: kept for tenant, by_tier in steps.items()
                 if (kept := {name: s for name, s in by_tier.items() if s > 0})}
        levels = {t.name: t.level for t in tiers}
        shifts = {tenant: _shift(by_tier, levels, step_size) for tenant, by_tier in steps.items()}
        shift: dict[int, float] = {}
        for each in shifts.values():
            for level, value in each.items():
                shift[level] = min(shift.get(level, 0.0), value)
        if steps != self.steps:
            log.warning("quality adjustment now %s (threshold shift %s)", steps or "none", shifts or "none")
        self.steps, self.shifts, self.shift = steps, shifts, shift
        for tier in tiers:
            metrics.STEP.labels(tier.name).set(max((s.get(tier.name, 0) for s in steps.values()), default=0))
        if thresholds:
            for level, value in thresholds.items():
                metrics.THRESHOLD.labels(str(level)).set(min(1.0, max(0.0, value + shift.get(level, 0.0))))
