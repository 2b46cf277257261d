"""Tier decision from class probabilities and per-tier thresholds (numpy only).

For k = 2..4 let C_k = P(tier >= k). The request goes to the highest k with
C_k >= threshold[k], else tier 1. Lower threshold[k] -> more traffic at tier k or above
(better quality, higher cost). Calibration sets the thresholds; callers may shift them.
"""
from __future__ import annotations

import numpy as np

TIERS = (1, 2, 3, 4)
DEFAULT_THRESHOLDS = {2: 0.5, 3: 0.5, 4: 0.5}


def cumulative(probs: np.ndarray) -> np.ndarray:
    """[N,4] class probabilities -> [N,3] with columns P(>=2), P(>=3), P(>=4)."""
    probs = np.atleast_2d(probs)
    return np.cumsum(probs[:, ::-1], axis=1)[:, ::-1][:, 1:]


def decide_many(probs: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Vectorised decision; `thresholds` is [3] (tiers 2..4) or [T,3] for a sweep -> [T,N]."""
    cum = cumulative(probs)
    th = np.asarray(thresholds, dtype=np.float64)
    if th.ndim == 1:
        return _decide(cum, th[None, :])[0]
    return _decide(cum, th)


def _decide(cum: np.ndarray, th: np.ndarray) -> np.ndarray:
    passed = cum[None, :, :] >= th[:, None, :]  # [T,N,3]
    # highest passing k: scan from tier 4 down
    tiers = np.ones(passed.shape[:2], dtype=np.int64)
    for k in (2, 3, 4):
        tiers = np.where(passed[:, :, k - 2], k, tiers)
    return tiers


def shifted(thresholds: dict[int, float], shift: dict[int, float] | None) -> np.ndarray:
    """Thresholds for tiers 2..4 after adding `shift[k]` (clipped to [0, 1])."""
    shift = shift or {}
    for k in shift:
        if k not in (2, 3, 4):
            raise ValueError(f"threshold_shift keys must be tiers 2..4, got {k!r}")
    return np.clip([thresholds[k] + float(shift.get(k, 0.0)) for k in (2, 3, 4)], 0.0, 1.0)


def decide(probs, thresholds: dict[int, float], threshold_shift: dict[int, float] | None = None,
           bias: int = 0) -> int:
    """One request's tier; `bias` moves the result up (+) or down (-) and is clamped to 1..4."""
    tier = int(decide_many(np.asarray(probs, dtype=np.float64), shifted(thresholds, threshold_shift))[0])
    return min(4, max(1, tier + int(bias)))
