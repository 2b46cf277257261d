"""Scoring a cascade against pre-generation routing on outcomes (benchmarks/cascade_outcomes.py; numpy
only). Three systems, each a family of operating points (strong calls, right answers, cost):
the router alone (its k highest scores go to the strong level), the cascade alone (every request
answered cheap, the k least confident re-asked: both paid), and both (a share of the router's
highest scores straight up, the rest cascading; the cascade off included). Each is read at its
best: strong calls and cost saved at 95% (and 100%) of the strong level's quality, APGR over
strong calls and over cost, and accuracy within a cost budget.
"""
from __future__ import annotations

import numpy as np

ROUTER_SHARES = np.linspace(0.0, 1.0, 21)  # the combined system: shares sent straight up
BUDGETS = (0.1, 0.25, 0.5)  # normalised cost between always-cheap and always-strong
TARGET = 0.95


def _order(score: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Highest score first, ties at random."""
    return np.lexsort((rng.random(len(score)), -np.asarray(score, float)))


def _climb(base_q: float, base_c: float, calls0: int, gain: np.ndarray, extra: np.ndarray):
    """Points after sending 0..len(gain) more requests up, in the given order."""
    q = base_q + np.concatenate([[0.0], np.cumsum(gain)])
    c = base_c + np.concatenate([[0.0], np.cumsum(extra)])
    return calls0 + np.arange(len(gain) + 1), q, c


def operating_points(weak, strong, cost_cheap, cost_strong, router_score, confidence, rng) -> dict:
    """{system: (strong calls, right answers, cost) per operating point}."""
    lift = strong - weak
    by_router, by_doubt = _order(router_score, rng), _order(-np.asarray(confidence, float), rng)
    out = {"router": _climb(weak.sum(), cost_cheap.sum(), 0, lift[by_router], (cost_strong - cost_cheap)[by_router]),
           "cascade": _climb(weak.sum(), cost_cheap.sum(), 0, lift[by_doubt], cost_strong[by_doubt])}
    parts = []
    for share in ROUTER_SHARES:
        m = int(round(share * len(weak)))
        up, rest = by_router[:m], np.sort(by_router[m:])
        rest = rest[_order(-np.asarray(confidence, float)[rest], rng)]
        parts.append(_climb(weak[rest].sum() + strong[up].sum(), cost_cheap[rest].sum() + cost_strong[up].sum(), m,
                            lift[rest], cost_strong[rest]))
    parts.append(out["router"])  # the cascade turned off is one of the combination's settings
    out["router+cascade"] = tuple(np.concatenate(x) for x in zip(*parts))
    return out


def _envelope_mean(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> float:
    """Mean over the grid of the best y among points with x within it."""
    order = np.argsort(x, kind="stable")
    best = np.maximum.accumulate(y[order])
    at = np.searchsorted(x[order], grid + 1e-12, side="right") - 1
    return float(np.mean(np.where(at >= 0, best[np.maximum(at, 0)], y.min())))


def frontier_figures(points, weak, strong, cost_cheap, cost_strong) -> dict:
    """save95, cost_save95, APGR (strong calls and cost) and accuracy at the budgets."""
    calls, right, cost = points
    n, qw, qs = len(weak), weak.mean(), strong.mean()
    quality, share = right / n, calls / n
    low, high = cost_cheap.sum(), cost_strong.sum()
    gap = qs - qw
    pgr = (quality - qw) / gap if gap > 0 else np.ones_like(quality)
    grid = np.arange(n + 1) / n
    saves = {}
    for name, target in (("95", TARGET), ("100", 1.0)):  # always-strong is among the points: never empty
        ok = quality >= target * qs - 1e-12
        saves |= {f"save{name}": 1.0 - float(share[ok].min()), f"cost_save{name}": 1.0 - float(cost[ok].min()) / high}
    return {**saves,
            "apgr": _envelope_mean(share, pgr, grid) if gap > 0 else 1.0,
            "apgr_cost": _envelope_mean((cost - low) / max(high - low, 1e-12), pgr, grid) if gap > 0 else 1.0,
            **{f"accuracy_at_cost_{b}": _best_within(quality, cost, low + b * (high - low)) for b in BUDGETS}}


def _best_within(quality: np.ndarray, cost: np.ndarray, budget: float) -> float | None:
    within = cost <= budget + 1e-12
    return float(quality[within].max()) if within.any() else None


def compare(weak, strong, cost_cheap, cost_strong, router_score, confidence, rng) -> dict:
    """The core: each system's figures on one set of test rows."""
    weak, strong = np.asarray(weak, float), np.asarray(strong, float)
    points = operating_points(weak, strong, cost_cheap, cost_strong, router_score, confidence, rng)
    return {name: frontier_figures(p, weak, strong, cost_cheap, cost_strong) for name, p in points.items()}
