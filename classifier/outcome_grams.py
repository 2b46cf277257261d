"""A character n-gram model of the gain per tier level, evaluated on the request's own grams.

Wording carries what a mean of token vectors blurs ("in base 7", "sqrt(", "reverse the word"):
a TF-IDF row of character 2..4-grams of the text the classifier reads (textnorm.model_text), and
one logistic regression per level on it. It is fitted with scikit-learn (GramModel.fit, training
and the learner only) and served in numpy through the same trie as the classifier's own grams
(sparse_model.CharGrams): only the grams a request has are touched.
"""
from __future__ import annotations

import numpy as np

from .sparse_model import CharGrams

NS = range(2, 5)
MAX_GRAMS = 20000
MIN_DF = 2
C = 1.0  # inverse L2 strength (docs/routing.md)
EPS = 1e-12


class GramModel:
    """logits(texts) -> [M, levels] for texts as textnorm.model_text writes them (ASCII, one line)."""

    def __init__(self, grams: np.ndarray, idf: np.ndarray, weights: np.ndarray, intercepts: np.ndarray,
                 fitted: np.ndarray):
        self.grams, self.idf, self.weights = grams, idf.astype(np.float64), weights.astype(np.float64)
        self.intercepts, self.fitted = intercepts.astype(np.float64), fitted.astype(bool)
        self._stage = CharGrams({str(g): i for i, g in enumerate(grams)}, NS, self.weights, self.idf, EPS)

    def logits(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), len(self.intercepts)))
        for row, text in enumerate(texts):
            if text.isascii() and "\n" not in text:  # what the trie reads; anything else: intercepts only
                out[row] = self._stage.logits(text)
        return out + self.intercepts

    def arrays(self) -> dict[str, np.ndarray]:
        return {"gram_vocab": self.grams, "gram_idf": self.idf, "gram_weights": self.weights,
                "gram_intercepts": self.intercepts, "gram_fitted": self.fitted}

    @classmethod
    def from_arrays(cls, d) -> "GramModel | None":
        if "gram_vocab" not in d or not len(d["gram_vocab"]):
            return None
        return cls(d["gram_vocab"], d["gram_idf"], d["gram_weights"], d["gram_intercepts"], d["gram_fitted"])

    @classmethod
    def fit(cls, texts: list[str], labels: list[tuple[np.ndarray, np.ndarray] | None]) -> "GramModel | None":
        """One regression per level from (rows, 0/1 targets) or None (no model at that level)."""
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        if not any(labels):
            return None
        vectorizer = TfidfVectorizer(analyzer="char", ngram_range=(NS.start, NS.stop - 1), lowercase=False,
                                     min_df=MIN_DF if len(texts) >= 200 else 1, max_features=MAX_GRAMS,
                                     dtype=np.float64)
        try:
            x = vectorizer.fit_transform(texts)
        except ValueError:  # no gram met min_df
            return None
        weights = np.zeros((x.shape[1], len(labels)))
        intercepts, fitted = np.zeros(len(labels)), np.zeros(len(labels), bool)
        for level, label in enumerate(labels):
            if label is None:
                continue
            rows, y = label
            model = LogisticRegression(C=C, max_iter=2000).fit(x[rows], y)
            weights[:, level], intercepts[level], fitted[level] = model.coef_[0], model.intercept_[0], True
        vocab = vectorizer.vocabulary_
        grams = np.empty(len(vocab), dtype=f"<U{NS.stop - 1}")
        for gram, col in vocab.items():
            grams[col] = gram
        return cls(grams, vectorizer.idf_, weights, intercepts, fitted)
