"""Fit the per-level outcome models (scikit-learn: training and the gateway's background learner)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .outcome_grams import GramModel
from .outcome_model import (CAPACITY, LEVELS, PASS, UNKNOWN, LevelFit, OutcomeMemory, OutcomeModel, blended, logit,
                            monotone, need_from, prior_p_good, target_labels)

TENANT_ROWS = 2048  # nearest outcomes kept per tenant (quality.outcome_rows_per_tenant)
TENANTS = 256  # tenants with a memory of their own, the most recently seen (quality.outcome_memory_tenants)
MIN_ROWS = 20  # per level, and
MIN_EACH = 3   # of passes and of failures, before a level gets a fitted model
C = 1.0        # inverse L2 strength (measured: docs/routing.md)


def _level_fit(x: np.ndarray, y: np.ndarray) -> LevelFit | None:
    from sklearn.linear_model import LogisticRegression

    if len(y) < MIN_ROWS or min(int(y.sum()), int((~y).sum())) < MIN_EACH:
        return None
    model = LogisticRegression(C=C, max_iter=2000).fit(x, y)
    return LevelFit(model.coef_[0].astype(np.float64), float(model.intercept_[0]), len(y))


def top_level(known: np.ndarray) -> int:
    """Index of the highest level any outcome observed (implied passes above it do not count)."""
    seen = np.flatnonzero((known != UNKNOWN).any(0))
    return int(seen.max()) if len(seen) else len(LEVELS) - 1


def remembered(vectors: np.ndarray, known: np.ndarray, owners: list[str], capacity: int = CAPACITY,
               tenant_rows: int = TENANT_ROWS, tenants: int = TENANTS) -> tuple[OutcomeMemory, dict[str, OutcomeMemory]]:
    """(the shared memory, one per tenant) from rows owned by "" (shared) or a tenant: the newest
    `capacity` shared rows and `tenant_rows` of each of the `tenants` tenants seen most recently,
    so a busy tenant never pushes a quiet one's outcomes out, and memory is bounded by
    capacity + tenants x tenant_rows rows however many tenants there are."""
    owners = np.asarray(owners, dtype=object)
    last_seen = {owner: i for i, owner in enumerate(owners.tolist())}
    recent = sorted((o for o in last_seen if o), key=last_seen.get)[-tenants:] if tenants else []
    memories = {}
    for owner in ["", *recent]:
        rows = np.flatnonzero(owners == owner)[-(capacity if owner == "" else tenant_rows):]
        if len(rows):
            memories[owner] = OutcomeMemory.empty(vectors.shape[1]).plus(vectors[rows], known[rows], len(rows))
    return memories.pop("", OutcomeMemory.empty(vectors.shape[1])), memories


def fit(numeric: np.ndarray, probs: np.ndarray, known: np.ndarray, dims: int,
        capacity: int = CAPACITY, texts: list[str] | None = None, target: str = "gain",
        top: int | None = None, owners: list[str] | None = None, tenant_rows: int = TENANT_ROWS,
        tenants: int = TENANTS) -> OutcomeModel:
    """An OutcomeModel from [N,F] features, the classifier's [N,4] probabilities at the time, and
    [N,4] PASS / FAIL / UNKNOWN per level; the newest `capacity` rows are fitted. With the texts the
    classifier read, the n-gram model of the target is fitted too. Each row's nearest-outcome memory
    is its owner's (remembered(); without owners every row is shared, the newest `capacity` kept)."""
    owners = [""] * len(numeric) if owners is None else list(owners)
    memory, tenant_memories = remembered(np.asarray(numeric, np.float64)[:, -dims:], np.asarray(known, np.int8),
                                         owners, capacity, tenant_rows, tenants)
    # the newest rows only: bounds the fit's time (the learner refits at every candidate)
    numeric, known = np.asarray(numeric, np.float64)[-capacity:], np.asarray(known, np.int8)[-capacity:]
    probs = np.asarray(probs)[-capacity:]
    texts = list(texts)[-capacity:] if texts is not None else None
    if not len(numeric):
        return replace(OutcomeModel.empty(numeric.shape[1], dims), memory=memory, tenant_memories=tenant_memories)
    top = top_level(known) if top is None else top
    # structural counts on one scale; the unit task vector keeps its own (standardising its
    # dimensions made each as loud as a count and overfitted: docs/routing.md)
    mean, scale = numeric.mean(0), numeric.std(0) + 1e-6
    mean[-dims:], scale[-dims:] = 0.0, 1.0
    z, prior = (numeric - mean) / scale, prior_p_good(probs)
    fits = []
    for i, _ in enumerate(LEVELS):
        rows = known[:, i] != UNKNOWN
        fits.append(_level_fit(np.hstack([logit(prior[rows, i:i + 1]), z[rows]]), known[rows, i] == PASS))
    fits = tuple(fits)
    need_prior = need_from(monotone(blended(fits, prior, z)), top, target)
    hits, labelled = target_labels(known, top, target)
    gain_fits, gram_labels = [], []
    for i, _ in enumerate(LEVELS):
        rows = labelled[:, i]
        gain_fits.append(_level_fit(np.hstack([logit(need_prior[rows, i:i + 1]), z[rows]]), hits[rows, i]))
        gram_labels.append((rows, hits[rows, i]) if gain_fits[-1] is not None else None)
    grams = GramModel.fit(texts, gram_labels) if texts is not None else None
    return OutcomeModel(memory, fits, mean.astype(np.float32), scale.astype(np.float32), tuple(gain_fits), grams,
                        top, target, tenant_memories=tenant_memories)


FOLDS = 5
MIN_CALIBRATION_ROWS = 40  # labelled pairs before the quality target is calibrated
CALIBRATION_ROWS = 2000  # newest rows the out-of-fold needs come from: bounds the learner's refit time


def fit_calibrated(numeric: np.ndarray, probs: np.ndarray, known: np.ndarray, dims: int, in_play: np.ndarray,
                   capacity: int = CAPACITY, texts: list[str] | None = None, seed: int = 0,
                   owners: list[str] | None = None, tenant_rows: int = TENANT_ROWS, tenants: int = TENANTS) -> OutcomeModel:
    """fit() on every row, with the quality target calibrated on out-of-fold needs: each row's need
    comes from a model that never saw it (its own outcome would be its nearest neighbour), read
    through its own tenant's memory."""
    from .outcome_target import TARGETS, calibrate

    top = int(in_play[-1]) - 1
    model = fit(numeric, probs, known, dims, capacity, texts, top=top, owners=owners, tenant_rows=tenant_rows,
                tenants=tenants)
    _, labelled = target_labels(known[-capacity:], top, "gain")
    if labelled.any(1).sum() < MIN_CALIBRATION_ROWS or len(in_play) < 2:
        return model
    owners = [""] * len(numeric) if owners is None else list(owners)
    n = min(len(numeric), capacity, CALIBRATION_ROWS)
    numeric, probs, known, owners = numeric[-n:], probs[-n:], known[-n:], owners[-n:]
    texts = list(texts)[-n:] if texts is not None else None
    fold = np.random.default_rng(seed).permutation(len(known)) % FOLDS
    need = np.zeros((len(known), len(LEVELS)))

    def pick(items, mask):
        return [x for x, m in zip(items, mask) if m] if items is not None else None

    for f in range(FOLDS):
        out, keep = fold == f, fold != f
        part = fit(numeric[keep], probs[keep], known[keep], dims, capacity, pick(texts, keep), top=top,
                   owners=pick(owners, keep), tenant_rows=tenant_rows, tenants=tenants)
        need[out] = part.assess_each(numeric[out], probs[out], dims, pick(owners, out), pick(texts, out)).need
    return replace(model, targets=TARGETS, thresholds=calibrate(need, known == PASS, np.asarray(in_play)))
