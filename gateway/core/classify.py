"""The gateway's view of the complexity classifier: one small interface.

The real classifier is the ONNX model in classifier/runtime.py. When it is not installed or
its model file is missing, the gateway falls back to PromptLengthClassifier, a deterministic
rule on prompt length, and says so in its log and in /v1/route answers.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Mapping, Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Classification:
    tier: int  # complexity level 1 (simple) .. 4 (expert)
    scores: list[float] | None  # one probability per level, when the classifier has them
    classifier: str
    thresholds: Mapping[int, float] | None = None  # the model's calibrated thresholds on P(level >= k)
    p_good: list[float] | None = None  # P(tier level L is good enough), L = 1..4 (outcome models)
    evidence: list[float] | None = None  # weight of past outcomes behind each p_good (0: the prior alone)
    prior: list[float] | None = None  # the classifier's own probabilities, before outcomes moved them
    need: list[float] | None = None  # P(top right AND level L wrong): the gain forgone by stopping at L
    target_thresholds: Mapping[float, float] | None = None  # quality target -> threshold on need (calibrated)


class Classifier(Protocol):
    name: str
    version: str | None  # None: a rule, not a trained model
    thresholds: Mapping[int, float] | None  # the model's calibrated thresholds, if it has any

    def classify(self, messages: list[dict] | None, prompt: str | None, tenant: str | None = None) -> Classification:
        """`tenant`: whose learned outcomes may decide (None: only those every tenant shares)."""


class PromptLengthClassifier:
    """Fallback rule, not a model: longer prompts are assumed harder.

    Levels by prompt characters: < 200 -> 1, < 1000 -> 2, < 4000 -> 3, else 4."""

    name = "prompt-length-rule"
    version = None
    thresholds = None
    BOUNDS = (200, 1000, 4000)

    def classify(self, messages, prompt, tenant=None) -> Classification:
        size = sum(len(m["content"]) for m in messages) if messages else len(prompt or "")
        level = 1 + sum(size >= bound for bound in self.BOUNDS)
        return Classification(tier=level, scores=None, classifier=self.name)


class OnnxComplexityClassifier:
    """Adapter over classifier.runtime.ComplexityClassifier."""

    name = "onnx-complexity"

    def __init__(self, model):
        self.model = model
        self._targets = model.target_thresholds()  # fixed for this model: a swap builds a new adapter

    def classify(self, messages, prompt, tenant=None) -> Classification:
        p = self.model.predict(messages=messages, prompt=prompt, tenant=tenant)
        return Classification(tier=int(p.tier), scores=p.probs, classifier=self.name, thresholds=self.model.thresholds,
                              p_good=p.p_good, evidence=p.evidence, prior=p.prior, need=p.need,
                              target_thresholds=self._targets)

    @property
    def version(self) -> str:
        return self.model.version

    @property
    def thresholds(self) -> dict[int, float]:
        return self.model.thresholds


class ClassifierSlot:
    """The classifier requests use now. Routing reads `current`; the hot-swapper replaces it in
    one assignment, so a request sees the old model or the new one, never a mix."""

    def __init__(self, classifier: Classifier):
        self.current = classifier


def load_classifier() -> Classifier:
    try:
        from classifier.runtime import ComplexityClassifier
        classifier = OnnxComplexityClassifier(ComplexityClassifier.load())
        classifier.classify([{"role": "user", "content": "hello"}], None)  # fail now, not per request
        return classifier
    except Exception as exc:  # missing module, model file or runtime: fall back, loudly
        log.warning("ONNX complexity classifier unavailable (%s: %s); using %s",
                    type(exc).__name__, exc, PromptLengthClassifier.name)
        return PromptLengthClassifier()
