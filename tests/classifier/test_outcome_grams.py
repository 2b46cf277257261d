"""The n-gram gain model served in numpy gives scikit-learn's own decision values."""
import numpy as np
import pytest

from classifier.outcome_grams import GramModel
from classifier.textnorm import model_text, normalize_text


def test_served_logits_equal_the_fitted_regression(splits):
    rows = splits["test"][:300]
    texts = [model_text(normalize_text(r.get("prompt") or r["messages"][-1]["content"]), "") for r in rows]
    y = np.array([r["tier"] >= 3 for r in rows])
    everyone = np.ones(len(texts), bool)
    model = GramModel.fit(texts, [(everyone, y), None, None, None])
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vec = TfidfVectorizer(analyzer="char", ngram_range=(2, 4), lowercase=False, min_df=2, max_features=20000,
                          dtype=np.float64)
    x = vec.fit_transform(texts)
    expected = LogisticRegression(C=1.0, max_iter=2000).fit(x, y).decision_function(x)
    got = model.logits(texts)
    assert got[:, 0] == pytest.approx(expected, abs=1e-6)
    assert not got[:, 1:].any() and model.fitted.tolist() == [True, False, False, False]


def test_text_the_trie_cannot_read_gets_the_intercept_alone():
    texts = ["what is two plus two", "name a colour", "prove it", "sum of primes below ten"] * 5
    model = GramModel.fit(texts, [(np.ones(len(texts), bool), np.arange(len(texts)) % 2 == 0), None, None, None])
    assert model.logits(["caf\u00e9 au lait"])[0, 0] == pytest.approx(model.intercepts[0])


def test_nothing_to_learn_is_no_model():
    assert GramModel.fit(["a b c"], [None] * 4) is None
