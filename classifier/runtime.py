"""Serving-side classifier: numpy + onnxruntime only (never scikit-learn).

Probabilities come from `sparse_model.py`, the same graph evaluated on the request's own n-grams
(several times cheaper per request); onnxruntime runs the graph when that cannot.

    clf = ComplexityClassifier.load()          # the model shipped in classifier/model/
    pred = clf.predict(messages=[{"role": "user", "content": "hi"}])
    pred.tier, pred.probs, pred.thresholds, pred.p_good

A model folder may hold past outcomes (`outcomes.npz`, classifier/outcome_model.py): they move
the class probabilities away from the classifier's own, so every threshold acts on P(good enough).

Thread-safe: features are pure functions and onnxruntime's `run` may be called
concurrently on one session.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from .decision import DEFAULT_THRESHOLDS, TIERS, level_from_probs, levels_from_probs, shifted, shifted_values
from .features import FEATURE_NAMES, extract
from .outcome_model import Assessment, OutcomeModel, p_good_from_prior, probs_from_need
from .outcome_target import DEFAULT_TARGET
from .sparse_model import SparseModel, sparse_model
from .static_vectors import DIMS, vectors_digest

PACKAGED_MODEL_DIR = Path(__file__).resolve().parent / "model"
MODEL_FILE = "complexity.onnx"
METADATA_FILE = "metadata.json"


@dataclass(frozen=True)
class Prediction:
    tier: int
    probs: list[float]  # after outcomes; the classifier's own when there are none
    thresholds: dict[int, float]
    p_good: list[float]  # P(tier level L is good enough), L = 1..4
    evidence: list[float]  # weight of the past outcomes behind each p_good (0: the prior alone)
    prior: list[float]  # the classifier's own class probabilities
    need: list[float] | None = None  # P(the top level right AND level L wrong): the gain forgone by stopping at L


class ComplexityClassifier:
    def __init__(self, session: ort.InferenceSession, metadata: dict, outcomes: OutcomeModel | None = None,
                 sparse: SparseModel | None = None):
        self._session = session
        self._sparse = sparse
        self.metadata = metadata
        self.version: str = metadata.get("version", "unknown")
        raw = metadata.get("thresholds") or DEFAULT_THRESHOLDS
        self.outcomes = outcomes if outcomes is not None else OutcomeModel.empty(len(FEATURE_NAMES), DIMS)
        # learned outcomes with a calibrated quality target bound the gain forgone; else the classifier's own
        tau = self.outcomes.threshold_for(DEFAULT_TARGET) if self.outcomes.learned else None
        self.thresholds: dict[int, float] = {int(k): float(v) for k, v in raw.items()} if tau is None else \
            {k: tau for k in (2, 3, 4)}

    def target_thresholds(self) -> dict[float, float] | None:
        """Quality target -> threshold on need, as calibrated on stored verdicts (None: not calibrated)."""
        m = self.outcomes
        if not m.learned or m.targets is None:
            return None
        return {round(float(t), 4): float(v) for t, v in zip(m.targets, m.thresholds)}

    def with_outcomes(self, outcomes: OutcomeModel) -> "ComplexityClassifier":
        """The same model with other outcomes (the session is shared, never copied)."""
        return ComplexityClassifier(self._session, self.metadata, outcomes, self._sparse)

    @classmethod
    def load(cls, model_dir: str | Path | None = None) -> "ComplexityClassifier":
        folder = Path(model_dir) if model_dir is not None else PACKAGED_MODEL_DIR
        metadata = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
        expected = metadata.get("static_vectors_sha256")
        if expected and expected != vectors_digest():
            # the weights were fitted on other token vectors: its scores would be noise
            raise ValueError(f"{folder}: model was trained with static vectors {expected}, "
                             f"but classifier/model/static_vectors.npy is {vectors_digest()}; retrain it")
        options = ort.SessionOptions()
        # one request is tiny: extra threads only add wake-up latency on a shared CPU
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(folder / MODEL_FILE), options, providers=["CPUExecutionProvider"])
        return cls(session, metadata, OutcomeModel.load(folder, len(FEATURE_NAMES), DIMS),
                   sparse_model(folder / MODEL_FILE))

    def probabilities(self, texts: list[str], numeric: np.ndarray) -> np.ndarray:
        """[N,4] tier probabilities for already extracted inputs."""
        if not len(texts):
            return np.zeros((0, len(TIERS)), np.float32)
        numeric = np.asarray(numeric, dtype=np.float32).reshape(len(texts), -1)
        if self._sparse is not None and all(map(SparseModel.reads, texts)):
            return np.stack([self._sparse.probs(text, row) for text, row in zip(texts, numeric)])
        feed = {"text": np.asarray(texts, dtype=object).reshape(-1, 1), "numeric": numeric}
        return self._session.run(["probs"], feed)[0]

    def predict(self, messages: list[dict] | None = None, prompt: str | None = None,
                threshold_shift: dict[int, float] | None = None, bias: int = 0, tenant: str | None = None) -> Prediction:
        """`tenant`: whose remembered outcomes the nearest-outcome stage may read (None: the shared ones)."""
        text, numeric = extract(messages, prompt)
        if not self.outcomes.learned:  # the gateway's usual case: four floats, no numpy per step
            if self._sparse is not None and SparseModel.reads(text):
                own = self._sparse.probs(text, numeric).tolist()
            else:
                own = self.probabilities([text], numeric[None, :])[0].astype(np.float64).tolist()
            good = p_good_from_prior(own)
            need = [min(max(good[-1] - g, 0.0), 1.0) for g in good[:-1]] + [0.0]  # OutcomeModel.assess's, in floats
            return Prediction(self.level_from_probs(own, threshold_shift, bias), own,
                              self._effective(threshold_shift), good, [0.0] * len(own), list(own), need)
        prior, a, probs = self.estimate([text], numeric[None, :], tenant)
        return Prediction(self.level_from_probs(probs[0], threshold_shift, bias), probs[0].tolist(),
                          self._effective(threshold_shift), a.p_good[0].tolist(), a.weight[0].tolist(),
                          prior[0].tolist(), a.need[0].tolist())

    def predict_many(self, requests: list[dict], threshold_shift: dict[int, float] | None = None) -> list[Prediction]:
        """Batch form for rows shaped like `{"messages": [...]}` or `{"prompt": "..."}`."""
        if not requests:
            return []
        extracted = [extract(r.get("messages"), r.get("prompt")) for r in requests]
        prior, a, probs = self.estimate([t for t, _ in extracted], np.vstack([v for _, v in extracted]))
        tiers = levels_from_probs(probs, shifted(self.thresholds, threshold_shift))
        used = self._effective(threshold_shift)
        return [Prediction(int(t), p.tolist(), used, g.tolist(), w.tolist(), q.tolist(), n.tolist())
                for t, p, g, w, q, n in zip(tiers, probs, a.p_good, a.weight, prior, a.need)]

    def estimate(self, texts: list[str], numeric: np.ndarray,
                 tenant: str | None = None) -> tuple[np.ndarray, Assessment, np.ndarray]:
        """The classifier's [N,4] probabilities, what the outcome models make of them, and the class
        probabilities routing reads: P(level >= k) = need[k - 1] once outcomes are learned (the
        thresholds then bound the gain forgone), the classifier's own before."""
        prior = self.probabilities(texts, numeric).astype(np.float64)
        a = self.outcomes.assess(np.asarray(numeric, np.float64), prior, DIMS, texts, tenant)
        return prior, a, probs_from_need(a.need) if self.outcomes.learned else prior

    def level_from_probs(self, probs, threshold_shift: dict[int, float] | None = None, bias: int = 0) -> int:
        """Tier for given probabilities under shifted thresholds.

        `threshold_shift[k]` (k = 2..4) is added to the threshold on P(tier >= k): a negative
        shift sends more requests to tier k or above. To take load off a failing tier t,
        the quality monitor lowers the threshold of tier t+1, e.g. {t + 1: -0.1}.
        `bias` then moves the decided tier up or down, clamped to 1..4.
        """
        return level_from_probs(probs, self.thresholds, threshold_shift, bias)

    def _effective(self, threshold_shift: dict[int, float] | None) -> dict[int, float]:
        return dict(zip((2, 3, 4), shifted_values(self.thresholds, threshold_shift)))
