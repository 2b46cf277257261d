"""scikit-learn side: word + char TF-IDF, scaled structural features and the request's
meaning (cosine similarity of its static vector to each tier's mean vector) -> multinomial
logistic regression. Only the CLI and tests import this module; serving never does.

The 64 vector dimensions as direct inputs did worse on validation (macro-F1 0.784 vs 0.801):
with that many free weights the model learns which *topics* our templates put in which tier.
Four similarities to tier prototypes carry "this reads like a tier-4 ask" without that."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, log_loss
from sklearn.preprocessing import StandardScaler

from .features import N_STRUCTURAL, extract_many

# Explicit ASCII token pattern: skl2onnx maps it 1:1 onto ONNX's Tokenizer, and the
# text is already ASCII (textnorm), so both sides split identically.
TOKEN_PATTERN = r"[a-zA-Z0-9_]+"
# C is picked by log-loss on validation rows from unseen templates: F1 alone picks
# overconfident models whose probabilities cannot be thresholded for quality.
C_GRID = (0.5, 2.0, 8.0)
# Cosines lie in [-1, 1] and differ by tenths between tiers; scaled to the spread of the
# standardised structural columns so one regularisation strength suits both.
SIM_SCALE = 4.0


def tier_centroids(vectors: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """[4, dims] unit mean vector of each tier's training rows."""
    means = np.vstack([vectors[labels == t].mean(axis=0) for t in (1, 2, 3, 4)])
    return (means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)).astype(np.float32)


@dataclass
class SklearnModel:
    word: TfidfVectorizer
    char: TfidfVectorizer
    scaler: StandardScaler
    centroids: np.ndarray
    clf: LogisticRegression

    def design(self, texts: list[str], numeric: np.ndarray):
        structural, vectors = numeric[:, :N_STRUCTURAL], numeric[:, N_STRUCTURAL:]
        sims = (vectors @ self.centroids.T) * SIM_SCALE
        return sparse.hstack([self.word.transform(texts), self.char.transform(texts),
                              sparse.csr_matrix(self.scaler.transform(structural)), sparse.csr_matrix(sims)]).tocsr()

    def predict_proba(self, texts: list[str], numeric: np.ndarray) -> np.ndarray:
        return self.clf.predict_proba(self.design(texts, numeric))


# sublinear_tf stays off: skl2onnx's ONNX graph computes it differently from scikit-learn
# for repeated n-grams (measured up to 0.03 apart), which would break train/serve parity.
def _vectorizers(small: bool) -> tuple[TfidfVectorizer, TfidfVectorizer]:
    word = TfidfVectorizer(token_pattern=TOKEN_PATTERN, ngram_range=(1, 2), lowercase=False,
                           sublinear_tf=False, min_df=1 if small else 2, max_features=12000, dtype=np.float32)
    char = TfidfVectorizer(analyzer="char", ngram_range=(2, 4), lowercase=False, sublinear_tf=False,
                           min_df=1 if small else 3, max_features=16000, dtype=np.float32)
    return word, char


def fit(train_rows: list[dict], val_rows: list[dict] | None = None,
        progress: Callable[[str], None] = lambda _: None) -> tuple[SklearnModel, dict]:
    """Fit vectorizers and scaler on train, pick C by validation macro-F1, return model + info."""
    progress(f"features for {len(train_rows)} training rows")
    texts, numeric = extract_many(train_rows)
    labels = np.array([r["tier"] for r in train_rows])
    weights = np.array([float(r.get("weight", 1.0)) for r in train_rows])  # outcome rows weigh more
    word, char = _vectorizers(small=len(train_rows) < 500)
    word.fit(texts)
    char.fit(texts)
    scaler = StandardScaler().fit(numeric[:, :N_STRUCTURAL])
    base = SklearnModel(word, char, scaler, tier_centroids(numeric[:, N_STRUCTURAL:], labels), None)
    x_train = base.design(texts, numeric)
    grid = C_GRID if val_rows else C_GRID[1:2]
    best = None
    if val_rows:
        v_texts, v_numeric = extract_many(val_rows)
        x_val, y_val = base.design(v_texts, v_numeric), np.array([r["tier"] for r in val_rows])
    for c in grid:
        clf = LogisticRegression(C=c, max_iter=3000).fit(x_train, labels, sample_weight=weights)
        if val_rows:
            loss = log_loss(y_val, clf.predict_proba(x_val), labels=clf.classes_)
            f1 = f1_score(y_val, clf.predict(x_val), average="macro")
        else:
            loss = f1 = 0.0
        progress(f"C={c:g}: validation log-loss {loss:.3f}, macro-F1 {f1:.3f}")
        if best is None or loss < best[0]:
            best = (loss, c, clf, f1)
    base.clf = best[2]
    info = {"C": best[1], "validation_log_loss": round(best[0], 4), "validation_macro_f1": round(best[3], 4),
            "vocabulary": {"word": len(word.vocabulary_), "char": len(char.vocabulary_)}}
    return base, info
