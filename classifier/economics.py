"""Routing economics: per-tier prices from the config, cost of a routing, quality curves.

Cost model: a request routed to tier t costs in_tokens * input_price[t] + out_tokens *
output_price[t]. Input tokens ~ characters / 4 over all turns; output tokens are the
typical answer length for the request's true tier (OUTPUT_TOKENS), since the answer a task
needs does not depend on who writes it. Quality = share routed to a tier >= the label.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .decision import levels_from_probs

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "tiergate.yaml"
OUTPUT_TOKENS = {1: 60, 2: 300, 3: 700, 4: 1500}
SWEEP = np.linspace(0.0, 1.0, 201)


def tier_prices(config_path: str | Path | None = None) -> dict[int, tuple[float, float]]:
    """{level: (input, output) USD per million tokens}; the cheapest tier per level wins."""
    import yaml

    path = Path(config_path) if config_path else DEFAULT_CONFIG
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    prices: dict[int, tuple[float, float]] = {}
    for tier in data.get("tiers", []):
        level, p = int(tier["level"]), tier["price_per_mtok"]
        pair = (float(p["input"]), float(p["output"]))
        if level not in prices or sum(pair) < sum(prices[level]):
            prices[level] = pair
    missing = {1, 2, 3, 4} - set(prices)
    if missing:
        raise ValueError(f"{path}: tiers: no tier with level {sorted(missing)}")
    return prices


def input_tokens(row: dict) -> int:
    if row.get("messages") is not None:
        chars = sum(len(str(m.get("content") or "")) for m in row["messages"])
    else:
        chars = len(row.get("prompt") or "")
    return max(1, chars // 4)


def cost_matrix(rows: list[dict], prices: dict[int, tuple[float, float]], tiers_for_output) -> np.ndarray:
    """[N,4] USD cost of each request at each tier; `tiers_for_output` sets answer length."""
    tin = np.array([input_tokens(r) for r in rows], dtype=np.float64)
    tout = np.array([OUTPUT_TOKENS[int(t)] for t in tiers_for_output], dtype=np.float64)
    pin = np.array([prices[t][0] for t in (1, 2, 3, 4)])
    pout = np.array([prices[t][1] for t in (1, 2, 3, 4)])
    return (tin[:, None] * pin[None, :] + tout[:, None] * pout[None, :]) / 1e6


def outcome(routed: np.ndarray, labels: np.ndarray, costs: np.ndarray) -> tuple[float, float]:
    """(total cost, quality) of routing each request i to tier routed[i]."""
    routed = np.asarray(routed)
    cost = float(costs[np.arange(len(routed)), routed - 1].sum())
    return cost, float(np.mean(routed >= labels))


def sweep_curve(probs: np.ndarray, labels: np.ndarray, costs: np.ndarray) -> list[tuple[float, float]]:
    """(cost, quality) for one common threshold on P(tier >= k), swept over [0, 1]."""
    routed = levels_from_probs(probs, np.repeat(SWEEP[:, None], 3, axis=1))
    return [outcome(r, labels, costs) for r in routed]


def cheapest_at(points: list[tuple[float, float]], quality: float) -> float:
    feasible = [c for c, q in points if q >= quality - 1e-12]
    return min(feasible) if feasible else float("inf")


def random_cost_at(labels: np.ndarray, costs: np.ndarray, quality: float) -> float:
    """Cheapest label-blind random router (a mix of two fixed tiers) reaching `quality`."""
    fixed = [outcome(np.full(len(labels), t), labels, costs) for t in (1, 2, 3, 4)]
    best = min(c for c, q in fixed if q >= quality)
    for i, (ci, qi) in enumerate(fixed):
        for cj, qj in fixed[i + 1:]:
            if qi < quality <= qj:
                share = (quality - qi) / (qj - qi)  # probability of picking the higher tier
                best = min(best, (1 - share) * ci + share * cj)
    return best


def oracle_cost_at(labels: np.ndarray, costs: np.ndarray, quality: float) -> float:
    """Label-exact routing, then the allowed misses spent on the largest savings."""
    n = len(labels)
    at_label = costs[np.arange(n), labels - 1]
    savings = np.sort(at_label - costs[:, 0])[::-1]
    allowed = int(np.floor((1 - quality) * n + 1e-9))
    return float(at_label.sum() - savings[:allowed].clip(min=0).sum())


def apgr(points: list[tuple[float, float]], labels: np.ndarray, costs: np.ndarray, steps: int = 200) -> float:
    """Area under the quality-gap-recovered curve against normalised cost, in [0, 1].

    x: (cost - always-tier-1) / (always-top - always-tier-1); y: share of the quality
    gap between always-tier-1 and perfect quality recovered at cost <= x.
    """
    low = outcome(np.ones(len(labels), int), labels, costs)
    top = (outcome(np.full(len(labels), 4), labels, costs)[0], 1.0)
    return gap_recovered(points, low, top, steps)


def gap_recovered(points: list[tuple[float, float]], low: tuple[float, float], top: tuple[float, float],
                  steps: int = 200) -> float:
    """APGR of (cost, quality) points between the cheapest router `low` and the best one `top`."""
    (low_cost, low_q), (top_cost, top_q) = low, top
    pts = list(points) + [low, top]
    xs = np.array([(c - low_cost) / (top_cost - low_cost) for c, _ in pts])
    ys = np.array([(q - low_q) / (top_q - low_q) for _, q in pts])
    grid = (np.arange(steps) + 0.5) / steps
    return float(np.mean([ys[xs <= g].max() if np.any(xs <= g) else 0.0 for g in grid]))
