"""Fit the per-level outcome models (scikit-learn: training and the gateway's background learner)."""
from __future__ import annotations

import numpy as np

from .outcome_model import CAPACITY, FAIL, LEVELS, PASS, LevelFit, OutcomeMemory, OutcomeModel, logit, prior_p_good

MIN_ROWS = 20  # per level, and
MIN_EACH = 3   # of passes and of failures, before a level gets a fitted model
C = 1.0        # inverse L2 strength (measured: docs/routing.md)


def fit(numeric: np.ndarray, probs: np.ndarray, known: np.ndarray, dims: int,
        capacity: int = CAPACITY) -> OutcomeModel:
    """An OutcomeModel from [N,F] features, the classifier's [N,4] probabilities at the time, and
    [N,4] PASS / FAIL / UNKNOWN per level; the newest `capacity` rows are fitted and kept."""
    from sklearn.linear_model import LogisticRegression

    # the newest rows only: bounds the fit's time (the learner refits at every candidate)
    numeric, known = np.asarray(numeric, np.float64)[-capacity:], np.asarray(known, np.int8)[-capacity:]
    probs = np.asarray(probs)[-capacity:]
    if not len(numeric):
        return OutcomeModel.empty(numeric.shape[1], dims)
    # structural counts on one scale; the unit task vector keeps its own (standardising its
    # dimensions made each as loud as a count and overfitted: docs/routing.md)
    mean, scale = numeric.mean(0), numeric.std(0) + 1e-6
    mean[-dims:], scale[-dims:] = 0.0, 1.0
    z, prior = (numeric - mean) / scale, prior_p_good(probs)
    fits = []
    for i, _ in enumerate(LEVELS):
        rows = known[:, i] != -1
        passes, fails = int((known[rows, i] == PASS).sum()), int((known[rows, i] == FAIL).sum())
        if rows.sum() < MIN_ROWS or min(passes, fails) < MIN_EACH:
            fits.append(None)
            continue
        x = np.hstack([logit(prior[rows, i:i + 1]), z[rows]])
        model = LogisticRegression(C=C, max_iter=2000).fit(x, known[rows, i] == PASS)
        fits.append(LevelFit(model.coef_[0].astype(np.float64), float(model.intercept_[0]), int(rows.sum())))
    memory = OutcomeMemory.empty(dims).plus(numeric[:, -dims:], known, capacity)
    return OutcomeModel(memory, tuple(fits), mean.astype(np.float32), scale.astype(np.float32))
