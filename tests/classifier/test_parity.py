"""ONNX (onnxruntime) and scikit-learn give the same probabilities on the whole test split."""
import numpy as np
import onnxruntime as ort
import pytest

from classifier.export import to_onnx
from classifier.features import FEATURE_NAMES, extract_many
from classifier.training import fit

pytestmark = pytest.mark.slow  # trains the classifier once

MULTILINGUAL = ["Привет! Как дела?", "请设计一个分布式消息队列", "Explique-moi la photosynthèse, s'il te plaît",
                "café  CAFÉ  cafe\u0301", "∑ x² ≤ ∞ — proof?", "اشرح بالتفصيل", "नमस्ते", "   spaces\n\tand\ttabs  "]


@pytest.fixture(scope="module")
def trained(splits):
    # every 4th training row keeps the fit fast; the comparison uses the whole test split
    model, _ = fit(splits["train"][::4])
    session = ort.InferenceSession(to_onnx(model, len(FEATURE_NAMES)).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return model, session


def _onnx_probs(session, texts, numeric):
    return session.run(["probs"], {"text": np.array(texts, dtype=object).reshape(-1, 1), "numeric": numeric})[0]


def test_onnx_matches_sklearn_on_test_split(trained, splits):
    model, session = trained
    texts, numeric = extract_many(splits["test"])
    diff = np.abs(model.predict_proba(texts, numeric) - _onnx_probs(session, texts, numeric))
    assert diff.max() < 1e-4, diff.max()


def test_onnx_matches_sklearn_on_non_ascii_text(trained):
    model, session = trained
    texts, numeric = extract_many([{"prompt": t} for t in MULTILINGUAL])
    diff = np.abs(model.predict_proba(texts, numeric) - _onnx_probs(session, texts, numeric))
    assert diff.max() < 1e-4, diff.max()


def test_shipped_model_agrees_with_its_metrics(shipped, splits):
    """The packaged ONNX reproduces the test macro-F1 stored at training time."""
    from classifier.evaluation import probabilities
    from classifier.metrics import macro_f1
    probs = probabilities(shipped, splits["test"])
    labels = np.array([r["tier"] for r in splits["test"]])
    stored = shipped.metadata["metrics"]["test"]["macro_f1"]
    assert macro_f1(labels, probs.argmax(1) + 1) == pytest.approx(stored, abs=1e-4)


def test_onnx_reads_the_static_vector_like_sklearn(trained, splits):
    """The vector's columns reach the ONNX graph: changing only them moves both models' scores alike."""
    from classifier.static_vectors import DIMS
    model, session = trained
    texts, numeric = extract_many(splits["test"][:200])
    swapped = numeric.copy()
    swapped[:, -DIMS:] = swapped[::-1, -DIMS:]  # each request gets another request's meaning
    onnx_before, onnx_after = _onnx_probs(session, texts, numeric), _onnx_probs(session, texts, swapped)
    assert np.abs(onnx_after - onnx_before).max() > 0.05
    assert np.abs(model.predict_proba(texts, swapped) - onnx_after).max() < 1e-4
