"""Scoring a router on outcomes as the RouteLLM paper does: the k requests with the highest score go to
the strong level, k = 0..N (benchmarks/classifier_outcomes.py; numpy only).

PGR(k): the share of the quality gap (always weak -> always strong) recovered; APGR: its mean over
k; CPT(x): the least share of strong calls reaching PGR x; save95: the share of strong calls saved
at 95% of the strong level's quality.
"""
from __future__ import annotations

import numpy as np

T95 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26}  # two-sided 95% t


def curve_metrics(scores: np.ndarray, weak: np.ndarray, strong: np.ndarray, rng: np.random.Generator) -> dict:
    """APGR, CPT(50%), CPT(80%), savings at 95% of the strong level's quality, for one ranking."""
    n = len(scores)
    order = np.lexsort((rng.random(n), -np.asarray(scores, float)))  # highest first, ties at random
    quality = (weak.sum() + np.concatenate([[0.0], np.cumsum((strong - weak)[order])])) / n  # k = 0..N
    qw, qs = weak.mean(), strong.mean()
    pgr = (quality - qw) / (qs - qw) if qs > qw else np.ones_like(quality)
    share = np.arange(n + 1) / n

    def least(reached: np.ndarray) -> float:
        return float(share[np.argmax(reached)]) if reached.any() else 1.0

    return {"apgr": float(pgr.mean()), "cpt50": least(pgr >= 0.5), "cpt80": least(pgr >= 0.8),
            "save95": 1.0 - least(quality >= 0.95 * qs - 1e-12)}


def fixed_point(weak: np.ndarray, strong: np.ndarray, to_strong: bool) -> dict:
    """Always one level: its PGR in place of an area, and what it saves at 95% if it gets there."""
    q = strong.mean() if to_strong else weak.mean()
    gap = strong.mean() - weak.mean()
    enough = q >= 0.95 * strong.mean() - 1e-12
    return {"apgr": 1.0 if to_strong or gap <= 0 else 0.0, "cpt50": 1.0 if to_strong else None,
            "cpt80": 1.0 if to_strong else None, "save95": (0.0 if to_strong else 1.0) if enough else None}


def summary(runs: list[dict]) -> dict:
    """Mean and 95% t-interval per figure over the splits."""
    out = {}
    for key in runs[0]:
        values = np.array([r[key] for r in runs if r[key] is not None], float)
        if not len(values):
            out[key] = None
            continue
        half = T95.get(len(values), 2.0) * values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
        out[key] = {"mean": round(float(values.mean()), 4), "ci95": [round(float(values.mean() - half), 4),
                                                                      round(float(values.mean() + half), 4)]}
    return out
