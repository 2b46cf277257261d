"""Per-tier P(good enough): the classifier's prior, moved by this deployment's outcomes.

For tier level L the prior is P(level <= L) from the classifier's class probabilities. A stored
outcome says, for some levels, whether that tier's answer was good enough; a pass at L also holds
for every level above it, a failure for every level below. Two stages move the prior:

1. once a level has enough outcomes of both kinds, a logistic model on [logit(prior), features]
   (classifier/outcome_fit.py), blended with the prior by n / (n + BLEND_ROWS);
2. the K stored requests most similar to a new one (cosine of task vectors) weigh
   w = exp(SHARPNESS * (cos - 1)) each, and p = (PRIOR_WEIGHT * base + sum(w * good)) /
   (PRIOR_WEIGHT + sum(w)) over those that know L (RouteLLM's similarity weighting): a kind of
   request seen failing a few times moves at once, before any refit.

The choice and its figures: docs/routing.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

LEVELS = (1, 2, 3, 4)
UNKNOWN, FAIL, PASS = -1, 0, 1
PRIOR_WEIGHT = 1.0
BLEND_ROWS = 25
SHARPNESS = 15.0
NEIGHBOURS = 32
CAPACITY = 8192  # newest outcomes kept: bounds memory and the per-request scan (~8192 x 64 floats)
FILE = "outcomes.npz"


def known_levels(outcomes: Mapping[int, bool]) -> np.ndarray:
    """[4] int8 of PASS / FAIL / UNKNOWN per level, with what a pass or failure implies filled in."""
    row = np.full(len(LEVELS), UNKNOWN, np.int8)
    for level, passed in outcomes.items():
        if passed:
            row[int(level) - 1:][row[int(level) - 1:] == UNKNOWN] = PASS
        else:
            row[:int(level)][row[:int(level)] == UNKNOWN] = FAIL
    for level, passed in outcomes.items():  # what was observed beats what was implied
        row[int(level) - 1] = PASS if passed else FAIL
    return row


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.atleast_2d(np.asarray(vectors, np.float32))
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


@dataclass(frozen=True)
class OutcomeMemory:
    """Immutable: learning builds a new memory, so a swap is one assignment."""
    vectors: np.ndarray  # [N, D] unit task vectors
    known: np.ndarray    # [N, 4] PASS / FAIL / UNKNOWN

    @classmethod
    def empty(cls, dims: int) -> "OutcomeMemory":
        return cls(np.zeros((0, dims), np.float32), np.zeros((0, len(LEVELS)), np.int8))

    def __len__(self) -> int:
        return len(self.known)

    def plus(self, vectors: np.ndarray, known: np.ndarray, capacity: int = CAPACITY) -> "OutcomeMemory":
        vectors = np.concatenate([self.vectors, unit_rows(vectors)])[-capacity:]
        return OutcomeMemory(vectors, np.concatenate([self.known, np.asarray(known, np.int8)])[-capacity:])

    def evidence(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """([M,4] weighted passes, [M,4] total weight) from each query's nearest outcomes."""
        queries = unit_rows(queries)
        if not len(self):
            zeros = np.zeros((len(queries), len(LEVELS)))
            return zeros, zeros.copy()
        sims = queries @ self.vectors.T  # [M, N]
        k = min(NEIGHBOURS, sims.shape[1])
        near = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        weights = np.exp(SHARPNESS * (np.take_along_axis(sims, near, 1) - 1.0))[:, :, None]  # [M, k, 1]
        known = self.known[near]  # [M, k, 4]
        return (weights * (known == PASS)).sum(1), (weights * (known != UNKNOWN)).sum(1)



@dataclass(frozen=True)
class LevelFit:
    """A logistic model of P(good enough) at one level on [logit(prior), standardised features]."""
    coef: np.ndarray  # [1 + F]
    intercept: float
    rows: int  # outcomes it was fitted on: its share against the prior grows with them


@dataclass(frozen=True)
class OutcomeModel:
    """What a deployment learned about its tiers. Per level: a fitted model (once enough outcomes
    of both kinds exist) blended with the classifier's prior, then the nearest outcomes on top."""
    memory: OutcomeMemory
    fits: tuple[LevelFit | None, ...]  # one per level
    mean: np.ndarray  # [F] feature standardisation
    scale: np.ndarray

    @classmethod
    def empty(cls, features: int, dims: int) -> "OutcomeModel":
        return cls(OutcomeMemory.empty(dims), (None,) * len(LEVELS), np.zeros(features, np.float32),
                   np.ones(features, np.float32))

    @property
    def learned(self) -> bool:
        return bool(len(self.memory))

    def estimate(self, numeric: np.ndarray, probs: np.ndarray, dims: int) -> tuple[np.ndarray, np.ndarray]:
        """([M,4] p_good, [M,4] evidence weight) for [M,F] features and [M,4] class probabilities."""
        prior = prior_p_good(probs)
        if not self.learned:  # every request passes here: the prior alone needs no feature work
            return np.maximum.accumulate(np.clip(prior, 0.0, 1.0), axis=1), np.zeros_like(prior)
        numeric = np.atleast_2d(numeric)
        base = prior.copy()
        if any(f is not None for f in self.fits):
            z = (numeric - self.mean) / self.scale
            for i, fit in enumerate(self.fits):
                if fit is not None:
                    x = np.hstack([logit(prior[:, i:i + 1]), z])
                    share = fit.rows / (fit.rows + BLEND_ROWS)
                    base[:, i] = share * sigmoid(x @ fit.coef + fit.intercept) + (1 - share) * prior[:, i]
        passes, weight = self.memory.evidence(numeric[:, -dims:])
        posterior = (PRIOR_WEIGHT * base + passes) / (PRIOR_WEIGHT + weight)
        return np.maximum.accumulate(np.clip(posterior, 0.0, 1.0), axis=1), weight

    def save(self, folder: str | Path) -> None:
        fitted = [f is not None for f in self.fits]
        width = 1 + len(self.mean)
        coefs = np.stack([f.coef if f is not None else np.zeros(width) for f in self.fits])
        np.savez_compressed(Path(folder) / FILE, vectors=self.memory.vectors, known=self.memory.known,
                            fitted=np.array(fitted), coef=coefs,
                            intercept=np.array([f.intercept if f else 0.0 for f in self.fits]),
                            fit_rows=np.array([f.rows if f else 0 for f in self.fits]), mean=self.mean, scale=self.scale)

    @classmethod
    def load(cls, folder: str | Path, features: int, dims: int) -> "OutcomeModel":
        path = Path(folder) / FILE
        if not path.exists():
            return cls.empty(features, dims)
        with np.load(path) as d:
            memory = OutcomeMemory(d["vectors"].astype(np.float32), d["known"].astype(np.int8))
            fits = tuple(LevelFit(d["coef"][i], float(d["intercept"][i]), int(d["fit_rows"][i])) if d["fitted"][i]
                         else None for i in range(len(LEVELS)))
            model = cls(memory, fits, d["mean"].astype(np.float32), d["scale"].astype(np.float32))
        if memory.vectors.shape[1] != dims or len(model.mean) != features:
            raise ValueError(f"{path}: outcomes were stored with other features ({len(model.mean)} wide, "
                             f"vectors {memory.vectors.shape[1]}); this classifier has {features} and {dims}")
        return model


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def prior_p_good(probs: np.ndarray) -> np.ndarray:
    """[M,4] P(level <= L) from [M,4] class probabilities."""
    return np.cumsum(np.atleast_2d(probs), axis=1)


def p_good_from_prior(probs: list[float]) -> list[float]:
    """One request's p_good without outcomes, as OutcomeModel.estimate computes it for a batch
    (running sum, clipped to [0, 1], running maximum; the same float64 steps in the same order)."""
    out, total, best = [], 0.0, -math.inf
    for p in probs:
        total += p
        best = max(best, min(max(total, 0.0), 1.0))
        out.append(best)
    return out


def probs_from_p_good(p: np.ndarray) -> np.ndarray:
    """[M,4] class probabilities whose P(level >= k) is 1 - p_good[k-1]: the thresholds on those
    (calibration, the monitor's shift, quality_preference) then act on the quality target."""
    p = np.atleast_2d(p)
    edges = np.concatenate([np.zeros((len(p), 1)), p[:, :-1], np.ones((len(p), 1))], axis=1)
    return np.diff(edges, axis=1)
