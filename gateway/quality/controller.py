"""From per-tier adjustment steps (shared in Redis) to the classifier's threshold shift.

A tier of level L receives the requests whose decided level is at most L (and above the
tier below). Lowering the threshold on P(level >= L+1) moves the borderline ones up to the
next tier, so `step` steps on tier L become `threshold_shift[L+1] = -step * step_size`.
Routing reads `shift` (a plain dict swapped whole) on every request and policies/decision.py
adds it to the calibrated thresholds; no Redis on that path.
"""
from __future__ import annotations

import logging

from . import metrics

log = logging.getLogger(__name__)


class Controller:
    def __init__(self):
        self.steps: dict[str, int] = {}
        self.shift: dict[int, float] = {}

    def update(self, steps: dict[str, int], tiers, step_size: float, thresholds: dict[int, float] | None) -> None:
        steps = {name: s for name, s in steps.items() if s > 0}
        levels = {t.name: t.level for t in tiers}
        shift: dict[int, float] = {}
        for name, step in steps.items():
            level = levels.get(name)
            if level is not None and level < 4:
                shift[level + 1] = round(shift.get(level + 1, 0.0) - step * step_size, 6)
        if steps != self.steps:
            log.warning("quality adjustment now %s (threshold shift %s)", steps or "none", shift or "none")
        self.steps, self.shift = steps, shift
        for tier in tiers:
            metrics.STEP.labels(tier.name).set(steps.get(tier.name, 0))
        if thresholds:
            for level, value in thresholds.items():
                metrics.THRESHOLD.labels(str(level)).set(min(1.0, max(0.0, value + shift.get(level, 0.0))))
