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


def levels_from_probs(probs: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
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


def shifted_values(thresholds: dict[int, float], shift: dict[int, float] | None) -> list[float]:
    """Thresholds for tiers 2..4 after adding `shift[k]` (clipped to [0, 1])."""
    shift = shift or {}
    for k in shift:
        if k not in (2, 3, 4):
            raise ValueError(f"threshold_shift keys must be tiers 2..4, got {k!r}")
    return [min(1.0, max(0.0, thresholds[k] + float(shift.get(k, 0.0)))) for k in (2, 3, 4)]


def shifted(thresholds: dict[int, float], shift: dict[int, float] | None) -> np.ndarray:
    return np.asarray(shifted_values(thresholds, shift))


def level_from_probs(probs, thresholds: dict[int, float], threshold_shift: dict[int, float] | None = None,
           bias: int = 0) -> int:
    """One request's tier; `bias` moves the result up (+) or down (-) and is clamped to 1..4.

    Plain floats, not numpy: on the gateway's hot path numpy's per-call overhead on four
    numbers cost more than the ONNX inference itself. Sums run from tier 4 down, in the same
    order as `cumulative`, so both paths agree bit for bit."""
    th = shifted_values(thresholds, threshold_shift)
    p = [float(x) for x in probs]
    tier, tail = 1, 0.0
    for k in (4, 3, 2):
        tail += p[k - 1]
        if tier == 1 and tail >= th[k - 2]:
            tier = k
    return min(4, max(1, tier + int(bias)))
