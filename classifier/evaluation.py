"""Quality and routing-economics report of a loaded classifier on labelled rows."""
from __future__ import annotations

import numpy as np

from . import economics as econ
from .decision import levels_from_probs
from .features import extract_many
from .metrics import summary, under_routing_rate
from .runtime import ComplexityClassifier

QUALITY_TARGET = 0.95


def probabilities(clf: ComplexityClassifier, rows: list[dict]) -> np.ndarray:
    texts, numeric = extract_many(rows)
    return clf.probabilities(texts, numeric)


def evaluate_rows(clf: ComplexityClassifier, rows: list[dict], prices, probs: np.ndarray | None = None) -> dict:
    """Classification metrics (argmax) plus routing at the model's calibrated thresholds and
    the cost reductions at >= 95% quality for the classifier sweep, random and oracle."""
    labels = np.array([r["tier"] for r in rows])
    probs = probabilities(clf, rows) if probs is None else probs
    result = summary(labels, np.argmax(probs, axis=1) + 1)
    costs = econ.cost_matrix(rows, prices, labels)
    top_cost, _ = econ.outcome(np.full(len(rows), 4), labels, costs)
    routed = levels_from_probs(probs, np.array([clf.thresholds[k] for k in (2, 3, 4)]))
    cost, quality = econ.outcome(routed, labels, costs)
    curve = econ.sweep_curve(probs, labels, costs)

    def reduction(c: float) -> float:
        return round(1 - c / top_cost, 4)

    result.update({
        "rows": len(rows),
        "calibrated": {"quality": round(quality, 4), "cost_reduction": reduction(cost),
                       "under_routing_rate": round(under_routing_rate(labels, routed), 4),
                       "share_per_tier": {str(t): round(float(np.mean(routed == t)), 4) for t in (1, 2, 3, 4)}},
        "cost_reduction_at_95": reduction(econ.cheapest_at(curve, QUALITY_TARGET)),
        "random_cost_reduction_at_95": reduction(econ.random_cost_at(labels, costs, QUALITY_TARGET)),
        "oracle_cost_reduction_at_95": reduction(econ.oracle_cost_at(labels, costs, QUALITY_TARGET)),
        "apgr": round(econ.apgr(curve, labels, costs), 4),
    })
    return result
