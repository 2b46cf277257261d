"""Choose the thresholds on P(tier >= k) from a sample of prompts (RouteLLM-style).

Four targets:
- `for_accuracy`: the thresholds whose routing best matches the labels (macro-F1) with at most
  a given under-routing rate; needs labels. This is the default operating point after training.
- `for_quality`: cheapest thresholds whose quality (share routed >= label) and under-routing
  rate meet the targets; needs labels.
- `for_shares`: a target share of requests per tier; needs no labels.
- `for_cost`: a target average cost per request; needs no labels.
"""
from __future__ import annotations

import itertools

import numpy as np

from .decision import cumulative, levels_from_probs
from .metrics import macro_f1, under_routing_rate

# denser at the low end, where thresholds for high quality live
GRID = np.array([0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.13, 0.16, 0.2, 0.25, 0.3, 0.35,
                 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95])
_CHUNK = 500


def _as_dict(th) -> dict[int, float]:
    return {k: round(float(v), 4) for k, v in zip((2, 3, 4), th)}


def for_quality(probs: np.ndarray, labels: np.ndarray, costs: np.ndarray, quality: float = 0.95,
                max_under_routing: float = 0.05) -> dict[int, float]:
    """Grid search over (t2, t3, t4): minimum cost subject to both constraints.

    When nothing on the grid meets them, the highest-quality candidate is returned.
    """
    combos = np.array(list(itertools.product(GRID, GRID, GRID)))
    hard = labels >= 3
    best, best_key = None, None
    for start in range(0, len(combos), _CHUNK):
        th = combos[start:start + _CHUNK]
        routed = levels_from_probs(probs, th)  # [T,N]
        qual = np.mean(routed >= labels[None, :], axis=1)
        under = np.mean(routed[:, hard] == 1, axis=1) if np.any(hard) else np.zeros(len(th))
        cost = np.take_along_axis(np.broadcast_to(costs, (len(th),) + costs.shape),
                                  (routed - 1)[:, :, None], axis=2)[:, :, 0].sum(axis=1)
        ok = (qual >= quality) & (under <= max_under_routing)
        # feasible points rank by cost; infeasible ones only by how close they get
        keys = np.where(ok, cost, np.inf)
        i = int(np.argmin(keys)) if np.any(ok) else int(np.argmax(qual))
        key = (0, keys[i]) if np.any(ok) else (1, -qual[i])
        if best_key is None or key < best_key:
            best, best_key = th[i], key
    return _as_dict(best)


def for_accuracy(probs: np.ndarray, labels: np.ndarray, max_under_routing: float = 0.02) -> dict[int, float]:
    """Grid search over (t2, t3, t4): the highest macro-F1 whose under-routing (tier >= 3 sent
    to tier 1) stays within the bound; the first such point on the grid wins a tie. With no
    point within the bound, the one with the least under-routing."""
    hard = labels >= 3
    best, best_key = None, None
    for th in itertools.product(GRID, GRID, GRID):
        routed = levels_from_probs(probs, np.array(th))
        under = float(np.mean(routed[hard] == 1)) if np.any(hard) else 0.0
        key = (0, -macro_f1(labels, routed)) if under <= max_under_routing else (1, under)
        if best_key is None or key < best_key:
            best, best_key = th, key
    return _as_dict(best)


def for_shares(probs: np.ndarray, shares: list[float]) -> dict[int, float]:
    """Thresholds so that about shares[k-1] of the sample lands on tier k."""
    shares = np.asarray(shares, dtype=np.float64)
    if shares.shape != (4,) or np.any(shares < 0) or shares.sum() <= 0:
        raise ValueError("shares must be four non-negative numbers")
    shares = shares / shares.sum()
    cum = cumulative(probs)
    at_or_above = np.cumsum(shares[::-1])[::-1][1:]  # target share routed to >= 2, >= 3, >= 4
    th = [np.quantile(cum[:, j], 1 - s) if s > 0 else 1.0 + 1e-6 for j, s in enumerate(at_or_above)]
    return _as_dict(np.clip(th, 0.0, 1.0 + 1e-6))


def for_cost(probs: np.ndarray, costs: np.ndarray, cost_per_request: float) -> dict[int, float]:
    """Smallest common threshold (best quality) whose mean cost is within the target."""
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        routed = levels_from_probs(probs, np.full(3, mid))
        mean_cost = costs[np.arange(len(routed)), routed - 1].mean()
        lo, hi = (lo, mid) if mean_cost <= cost_per_request else (mid, hi)
    # round up: a higher threshold never costs more, so the target still holds after rounding
    return _as_dict(np.full(3, np.ceil(hi * 1e4) / 1e4))


def report(probs: np.ndarray, labels: np.ndarray | None, costs: np.ndarray, thresholds: dict[int, float]) -> dict:
    """What the thresholds do on the sample: per-tier share, mean cost, quality if labelled."""
    routed = levels_from_probs(probs, np.array([thresholds[k] for k in (2, 3, 4)]))
    out = {"share_per_tier": {str(t): round(float(np.mean(routed == t)), 4) for t in (1, 2, 3, 4)},
           "mean_cost_usd": float(costs[np.arange(len(routed)), routed - 1].mean())}
    if labels is not None:
        out["quality"] = round(float(np.mean(routed >= labels)), 4)
        out["under_routing_rate"] = round(under_routing_rate(labels, routed), 4)
    return out
