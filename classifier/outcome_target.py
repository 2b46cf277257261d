"""The quality target: the threshold on need (the gain forgone) that keeps a share of the top's quality.

A request goes to the cheapest level in play whose need is at most the threshold. On verdicts the
model did not learn from (out-of-fold or held out), the threshold for target t is the largest at
which the quality lost against always-top, plus Z standard errors of that loss, is at most
(1 - t) x the top's quality: with 95% confidence the target holds on traffic like the verdicts.
A level the verdicts leave open counts as not good enough (classifier/replay.py's rule). Thresholds
are tried from the strictest up and the first unsafe one ends the search, so one lucky point above
an unsafe one is never taken.
"""
from __future__ import annotations

import numpy as np

TARGETS = np.round(np.arange(0.80, 1.0001, 0.01), 2)  # the targets a model carries a threshold for
DEFAULT_TARGET = 0.95
Z = 1.645  # one-sided 95%
CANDIDATES = 400  # thresholds tried: quantiles of the needs seen


def routed_levels(need: np.ndarray, in_play: np.ndarray, threshold: float) -> np.ndarray:
    """[N] level (1-based) of the cheapest level in play whose need is within the threshold."""
    within = need[:, in_play - 1] <= threshold + 1e-12
    within[:, -1] = True  # the top in play loses nothing to itself
    return in_play[np.argmax(within, axis=1)]


def loss_bound(need: np.ndarray, right: np.ndarray, in_play: np.ndarray, threshold: float) -> tuple[float, float]:
    """(quality lost against always-top plus Z standard errors, the top's quality) at a threshold;
    `right` [N,4]: the level's answer was good enough (known to be)."""
    rows = np.arange(len(right))
    top = right[:, in_play[-1] - 1]
    routed = right[rows, routed_levels(need, in_play, threshold) - 1]
    d = top.astype(float) - routed
    se = d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else 1.0
    return float(d.mean() + Z * se), float(top.mean())


def calibrate(need: np.ndarray, right: np.ndarray, in_play: np.ndarray, targets: np.ndarray = TARGETS) -> np.ndarray:
    """[T] threshold per target (0 where nothing cheaper than the top is safe: all goes to the top)."""
    seen = need[:, in_play[:-1] - 1].ravel()
    candidates = np.unique(np.quantile(seen, np.linspace(0, 1, CANDIDATES))) if len(seen) else np.zeros(0)
    bounds = [loss_bound(need, right, in_play, t) for t in candidates]
    out = np.zeros(len(targets))
    for i, target in enumerate(targets):
        for t, (lost, top) in zip(candidates, bounds):  # ascending: stop at the first unsafe one
            if lost > (1 - target) * top + 1e-12:
                break
            out[i] = t
    return out


def threshold_for(targets: np.ndarray, thresholds: np.ndarray, target: float) -> float:
    """The threshold of the first calibrated target at or above `target` (never a laxer one)."""
    i = min(int(np.searchsorted(targets, target - 1e-9)), len(targets) - 1)
    return float(thresholds[i])
