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

What routing reads is the *gain*: need[L] = P(the top level right AND level L wrong), the quality
lost against the top by stopping at L. Its prior is p_good[top] - p_good[L] from the stages above
(without pair labels that is P(L fails)); a logistic model per level on pairs where both levels
answered, a character n-gram model (classifier/outcome_grams.py) and the nearest pairs move it the
same way. A request goes to the cheapest level whose need is within the threshold.

The choice and its figures: docs/routing.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from .outcome_grams import GramModel

LEVELS = (1, 2, 3, 4)
UNKNOWN, FAIL, PASS = -1, 0, 1
PRIOR_WEIGHT = 1.0
BLEND_ROWS = 25
SHARPNESS = 15.0
NEIGHBOURS = 32
CAPACITY = 8192  # newest outcomes kept: bounds memory and the per-request scan (~8192 x 64 floats)
SLICE = 2048  # memory rows per similarity product
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

    def evidence(self, queries: np.ndarray, top: int = len(LEVELS) - 1, target: str = "gain") -> "Evidence":
        return evidence((self,), queries, top, target)


def evidence(memories: tuple[OutcomeMemory, ...], queries: np.ndarray, top: int = len(LEVELS) - 1,
             target: str = "gain") -> "Evidence":
    """Weighted counts over each query's nearest outcomes among the memories': passes per level, and
    the target per level below `top` (gain: top passed and the level failed, among pairs where both
    are known; fail: the level failed), each with the weight that knew it."""
    queries = unit_rows(queries)
    memories = tuple(m for m in memories if len(m))
    if not memories:
        zeros = np.zeros((len(queries), len(LEVELS)))
        return Evidence(zeros, zeros.copy(), zeros.copy(), zeros.copy())
    # in slices small enough that OpenBLAS keeps each product on this thread: its threads
    # waiting for a core on a busy host cost milliseconds (docs/routing.md, serving latency)
    sims = np.hstack([queries @ m.vectors[i:i + SLICE].T for m in memories for i in range(0, len(m), SLICE)])
    k = min(NEIGHBOURS, sims.shape[1])
    near = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    weights = np.exp(SHARPNESS * (np.take_along_axis(sims, near, 1) - 1.0))[:, :, None]  # [M, k, 1]
    known = (memories[0].known if len(memories) == 1 else np.concatenate([m.known for m in memories]))[near]
    hits, labelled = target_labels(known, top, target)
    return Evidence((weights * (known == PASS)).sum(1), (weights * (known != UNKNOWN)).sum(1),
                    (weights * hits).sum(1), (weights * labelled).sum(1))


@dataclass(frozen=True)
class Evidence:
    passes: np.ndarray  # [M,4] weighted passes
    weight: np.ndarray  # [M,4] weight of the outcomes that knew each level
    hits: np.ndarray    # [M,4] weighted targets (gain or failure) per level
    labelled: np.ndarray  # [M,4] weight of the outcomes labelled for the target


def target_labels(known: np.ndarray, top: int, target: str) -> tuple[np.ndarray, np.ndarray]:
    """([..., 4] target hit, [..., 4] labelled) from PASS / FAIL / UNKNOWN rows; nothing at or above top."""
    below = np.arange(known.shape[-1]) < top
    if target == "fail":
        return (known == FAIL) & below, (known != UNKNOWN) & below
    top_known = known[..., top:top + 1]
    labelled = (known != UNKNOWN) & (top_known != UNKNOWN) & below
    return labelled & (known == FAIL) & (top_known == PASS), labelled


@dataclass(frozen=True)
class LevelFit:
    """A logistic model of P(good enough) at one level on [logit(prior), standardised features]."""
    coef: np.ndarray  # [1 + F]
    intercept: float
    rows: int  # outcomes it was fitted on: its share against the prior grows with them


@dataclass(frozen=True)
class Assessment:
    """What the outcome models say of M requests, per level (each [M,4])."""
    p_good: np.ndarray  # P(the level's answer is good enough)
    weight: np.ndarray  # weight of the past outcomes behind p_good (0: the prior alone)
    need: np.ndarray    # the target at each level: P(top right AND this level wrong) (0 at and above the top)
    need_weight: np.ndarray  # weight of the labelled pairs behind need


@dataclass(frozen=True)
class OutcomeModel:
    """What a deployment learned about its tiers. Per level: a fitted model (once enough outcomes
    of both kinds exist) blended with the classifier's prior, then the nearest outcomes on top;
    the same three stages, plus the n-gram model, for the gain against the top level."""
    memory: OutcomeMemory
    fits: tuple[LevelFit | None, ...]  # one per level
    mean: np.ndarray  # [F] feature standardisation
    scale: np.ndarray
    gain_fits: tuple[LevelFit | None, ...] = (None,) * len(LEVELS)
    grams: GramModel | None = None
    top: int = len(LEVELS) - 1  # index of the highest level the outcomes name
    target: str = "gain"  # or "fail": P(level fails), the target before (kept for the ablation)
    # the quality target's calibration (classifier/outcome_target.py): a threshold on need per target
    targets: np.ndarray | None = None
    thresholds: np.ndarray | None = None
    # nearest outcomes per tenant: a request consults its own tenant's and `memory` (the operator's,
    # or every tenant's where the operator shares them), never another tenant's
    tenant_memories: Mapping[str, OutcomeMemory] = field(default_factory=dict)

    def threshold_for(self, quality_target: float) -> float | None:
        """The calibrated threshold on need for this share of the top level's quality (None: none)."""
        if self.targets is None or self.thresholds is None:
            return None
        from .outcome_target import threshold_for

        return threshold_for(self.targets, self.thresholds, quality_target)

    @classmethod
    def empty(cls, features: int, dims: int) -> "OutcomeModel":
        return cls(OutcomeMemory.empty(dims), (None,) * len(LEVELS), np.zeros(features, np.float32),
                   np.ones(features, np.float32))

    @property
    def learned(self) -> bool:
        return bool(len(self.memory)) or any(self.fits) or any(self.gain_fits) or self.grams is not None or \
            any(map(len, self.tenant_memories.values()))

    def memories_for(self, tenant: str | None) -> tuple[OutcomeMemory, ...]:
        own = self.tenant_memories.get(tenant) if tenant else None
        return (self.memory,) if own is None else (self.memory, own)

    def estimate(self, numeric: np.ndarray, probs: np.ndarray, dims: int) -> tuple[np.ndarray, np.ndarray]:
        """([M,4] p_good, [M,4] evidence weight) for [M,F] features and [M,4] class probabilities."""
        a = self.assess(numeric, probs, dims)
        return a.p_good, a.weight

    def assess(self, numeric: np.ndarray, probs: np.ndarray, dims: int, texts: list[str] | None = None,
               tenant: str | None = None, queries: np.ndarray | None = None) -> Assessment:
        """p_good and need for [M,F] features, [M,4] class probabilities and (for the n-gram
        model) the texts the classifier read, for requests of one tenant (None: the shared memory only).
        `queries`: the vectors the nearest outcomes are found by, when the memory holds other ones
        than the features' static task vector (benchmarks/classifier_outcomes.py --knn-table)."""
        prior = prior_p_good(probs)
        if not self.learned:  # every request passes here: the prior alone needs no feature work
            good = monotone(prior)
            zeros = np.zeros_like(prior)
            return Assessment(good, zeros, need_from(good, self.top, self.target), zeros.copy())
        numeric = np.atleast_2d(numeric)
        z = (numeric - self.mean) / self.scale
        base = blended(self.fits, prior, z)
        need = blended(self.gain_fits, need_from(monotone(base), self.top, self.target), z)
        if self.grams is not None and texts is not None:
            fitted = self.grams.fitted
            need[:, fitted] = sigmoid((logit(need[:, fitted]) + self.grams.logits(texts)[:, fitted]) / 2)
        ev = evidence(self.memories_for(tenant), numeric[:, -dims:] if queries is None else queries, self.top,
                      self.target)
        good = monotone((PRIOR_WEIGHT * base + ev.passes) / (PRIOR_WEIGHT + ev.weight))
        need = (PRIOR_WEIGHT * need + ev.hits) / (PRIOR_WEIGHT + ev.labelled)
        need[:, self.top:] = 0.0
        # stopping lower never loses less than stopping higher
        need = np.maximum.accumulate(need[:, ::-1], axis=1)[:, ::-1]
        return Assessment(good, ev.weight, np.clip(need, 0.0, 1.0), ev.labelled)

    def assess_each(self, numeric: np.ndarray, probs: np.ndarray, dims: int, tenants: list[str | None],
                    texts: list[str] | None = None) -> Assessment:
        """assess() for rows of several tenants, each row with its own tenant's memory."""
        tenants = np.asarray([t or "" for t in tenants], dtype=object)
        parts = {}
        for tenant in dict.fromkeys(tenants):
            rows = np.flatnonzero(tenants == tenant)
            parts[tenant] = rows, self.assess(numeric[rows], probs[rows], dims,
                                              [texts[i] for i in rows] if texts is not None else None, tenant or None)
        out = [np.zeros((len(tenants), len(LEVELS))) for _ in range(4)]
        for rows, a in parts.values():
            for whole, part in zip(out, (a.p_good, a.weight, a.need, a.need_weight)):
                whole[rows] = part
        return Assessment(*out)

    def save(self, folder: str | Path) -> None:
        np.savez_compressed(Path(folder) / FILE, vectors=self.memory.vectors, known=self.memory.known,
                            mean=self.mean, scale=self.scale, top=self.top, target=self.target,
                            **({"targets": self.targets, "thresholds": self.thresholds}
                               if self.targets is not None else {}),
                            **_fit_arrays("", self.fits, len(self.mean)),
                            **_fit_arrays("gain_", self.gain_fits, len(self.mean)),
                            **(self.grams.arrays() if self.grams is not None else {}),
                            **_tenant_arrays(self.tenant_memories))

    @classmethod
    def load(cls, folder: str | Path, features: int, dims: int) -> "OutcomeModel":
        path = Path(folder) / FILE
        if not path.exists():
            return cls.empty(features, dims)
        with np.load(path) as d:
            memory = OutcomeMemory(d["vectors"].astype(np.float32), d["known"].astype(np.int8))
            model = cls(memory, _fits_from(d, ""), d["mean"].astype(np.float32), d["scale"].astype(np.float32),
                        _fits_from(d, "gain_"), GramModel.from_arrays(d),
                        int(d["top"]) if "top" in d else len(LEVELS) - 1,
                        str(d["target"]) if "target" in d else "gain",
                        d["targets"] if "targets" in d else None, d["thresholds"] if "thresholds" in d else None,
                        _tenant_memories(d))
        if memory.vectors.shape[1] != dims or len(model.mean) != features:
            raise ValueError(f"{path}: outcomes were stored with other features ({len(model.mean)} wide, "
                             f"vectors {memory.vectors.shape[1]}); this classifier has {features} and {dims}")
        return model


def blended(fits: tuple[LevelFit | None, ...], prior: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Per level with a fit: its logistic model on [logit(prior), z], blended with the prior by its rows."""
    out = prior.copy()
    for i, fit in enumerate(fits):
        if fit is not None:
            share = fit.rows / (fit.rows + BLEND_ROWS)
            x = np.hstack([logit(prior[:, i:i + 1]), z])
            out[:, i] = share * sigmoid(x @ fit.coef + fit.intercept) + (1 - share) * prior[:, i]
    return out


def need_from(p_good: np.ndarray, top: int, target: str) -> np.ndarray:
    """The target's prior from p_good: p_good[top] - p_good[L] (gain) or 1 - p_good[L] (fail), 0 from top up."""
    need = (1.0 if target == "fail" else p_good[:, top:top + 1]) - p_good
    need[:, top:] = 0.0
    return np.clip(need, 0.0, 1.0)


def _tenant_arrays(memories: Mapping[str, OutcomeMemory]) -> dict[str, np.ndarray]:
    if not memories:
        return {}
    names = [name for name, m in memories.items() for _ in range(len(m))]
    return {"tenant_rows": np.asarray(names, dtype=str),
            "tenant_vectors": np.concatenate([m.vectors for m in memories.values()]),
            "tenant_known": np.concatenate([m.known for m in memories.values()])}


def _tenant_memories(d) -> dict[str, OutcomeMemory]:
    if "tenant_rows" not in d:
        return {}
    names, vectors, known = d["tenant_rows"], d["tenant_vectors"].astype(np.float32), d["tenant_known"].astype(np.int8)
    return {str(n): OutcomeMemory(vectors[names == n], known[names == n]) for n in dict.fromkeys(names.tolist())}


def _fit_arrays(prefix: str, fits: tuple[LevelFit | None, ...], features: int) -> dict[str, np.ndarray]:
    width = 1 + features
    return {f"{prefix}fitted": np.array([f is not None for f in fits]),
            f"{prefix}coef": np.stack([f.coef if f is not None else np.zeros(width) for f in fits]),
            f"{prefix}intercept": np.array([f.intercept if f else 0.0 for f in fits]),
            f"{prefix}fit_rows": np.array([f.rows if f else 0 for f in fits])}


def _fits_from(d, prefix: str) -> tuple[LevelFit | None, ...]:
    if f"{prefix}fitted" not in d:
        return (None,) * len(LEVELS)
    return tuple(LevelFit(d[f"{prefix}coef"][i], float(d[f"{prefix}intercept"][i]), int(d[f"{prefix}fit_rows"][i]))
                 if d[f"{prefix}fitted"][i] else None for i in range(len(LEVELS)))


def monotone(p_good: np.ndarray) -> np.ndarray:
    """Within [0, 1], and a level never worse than the one below it."""
    return np.maximum.accumulate(np.clip(p_good, 0.0, 1.0), axis=1)


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


def probs_from_need(need: np.ndarray) -> np.ndarray:
    """[M,4] class probabilities whose P(level >= k) is need[k-1]: a threshold on those bounds the
    gain forgone by stopping below level k."""
    return probs_from_p_good(1.0 - np.atleast_2d(need))
