"""The sparse evaluation of the shipped model gives onnxruntime's probabilities, and stands aside for
a graph or a text it does not read."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from classifier.features import FEATURE_NAMES, extract, extract_many
from classifier.runtime import MODEL_FILE, PACKAGED_MODEL_DIR, ComplexityClassifier
from classifier.sparse_model import SparseModel, sparse_model

MODEL = PACKAGED_MODEL_DIR / MODEL_FILE
SESSION = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
SPARSE = sparse_model(MODEL)


def onnx_probs(texts, numeric):
    feed = {"text": np.array(texts, dtype=object).reshape(-1, 1), "numeric": np.asarray(numeric, np.float32)}
    return SESSION.run(["probs"], feed)[0]


def sparse_probs(texts, numeric):
    return np.stack([SPARSE.probs(text, row) for text, row in zip(texts, np.asarray(numeric, np.float32))])


def test_the_shipped_graph_is_read():
    assert SPARSE is not None


def test_same_probabilities_as_onnxruntime_on_the_test_split(splits):
    texts, numeric = extract_many(splits["test"])
    assert all(map(SparseModel.reads, texts))
    diff = np.abs(sparse_probs(texts, numeric) - onnx_probs(texts, numeric))
    assert diff.max() < 1e-5, diff.max()


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=400))
def test_same_probabilities_on_any_ascii_text(raw):
    """Any request text, through extract (lower-cased, one line, clipped) as in serving."""
    text, numeric = extract(None, raw)
    assert SparseModel.reads(text)
    diff = np.abs(sparse_probs([text], [numeric]) - onnx_probs([text], [numeric]))
    assert diff.max() < 1e-5, (text, diff.max())


@pytest.mark.parametrize("text", ["", "a", "ab", "abc", "zctx", "_ _ _", "1 2 3 4 5 6", "a  b", "##"])
def test_short_and_degenerate_texts(text):
    numeric = np.zeros((1, len(FEATURE_NAMES)), np.float32)
    assert np.abs(sparse_probs([text], numeric) - onnx_probs([text], numeric)).max() < 1e-5


def test_other_graphs_stay_with_onnxruntime():
    model = onnx.load(str(MODEL))
    model.graph.node.pop()  # no Softmax: not the graph export.py writes
    assert SparseModel.of(model) is None
    assert not SparseModel.reads("two\nlines") and not SparseModel.reads("café")


def test_classifier_falls_back_to_onnxruntime_for_texts_it_does_not_read():
    clf = ComplexityClassifier.load()
    texts, numeric = ["line one\nline two", "plain words"], np.zeros((2, len(FEATURE_NAMES)), np.float32)
    assert np.abs(clf.probabilities(texts, numeric) - onnx_probs(texts, numeric)).max() < 1e-6


def test_no_texts_no_rows():
    assert ComplexityClassifier.load().probabilities([], np.zeros((0, len(FEATURE_NAMES)), np.float32)).shape == (0, 4)
