"""Classification metrics in numpy (usable without scikit-learn)."""
from __future__ import annotations

import numpy as np

TIERS = (1, 2, 3, 4)


def confusion(labels: np.ndarray, predicted: np.ndarray) -> list[list[int]]:
    """Rows: true tier 1..4; columns: predicted tier 1..4."""
    return [[int(np.sum((labels == t) & (predicted == p))) for p in TIERS] for t in TIERS]


def recall_per_tier(labels: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    return {str(t): round(float(np.mean(predicted[labels == t] == t)), 4)
            for t in TIERS if np.any(labels == t)}


def macro_f1(labels: np.ndarray, predicted: np.ndarray) -> float:
    scores = []
    for t in TIERS:
        tp = np.sum((labels == t) & (predicted == t))
        fp = np.sum((labels != t) & (predicted == t))
        fn = np.sum((labels == t) & (predicted != t))
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def under_routing_rate(labels: np.ndarray, routed: np.ndarray) -> float:
    """Share of requests whose true tier is >= 3 that were routed to tier 1."""
    hard = labels >= 3
    return float(np.mean(routed[hard] == 1)) if np.any(hard) else 0.0


def summary(labels: np.ndarray, predicted: np.ndarray) -> dict:
    return {"macro_f1": round(macro_f1(labels, predicted), 4),
            "recall_per_tier": recall_per_tier(labels, predicted),
            "accuracy": round(float(np.mean(labels == predicted)), 4),
            "confusion": confusion(labels, predicted)}
