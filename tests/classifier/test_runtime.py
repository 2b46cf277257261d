"""The shipped model loads through onnxruntime and decides tiers sensibly."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from classifier.decision import level_from_probs, levels_from_probs, shifted
from classifier.features import extract
from classifier.runtime import ComplexityClassifier, Prediction


def test_metadata_describes_the_model(shipped):
    meta = shipped.metadata
    assert shipped.version == meta["version"] and meta["trained_at"]
    assert set(meta["training"]["label_distribution"]) == {"1", "2", "3", "4"}
    assert meta["dataset"]["templates"] >= 100 and meta["dataset"]["domains"] >= 20
    assert {"test", "heldout"} <= set(meta["metrics"])
    assert set(shipped.thresholds) == {2, 3, 4}


def test_predict_chat_and_prompt(shipped):
    easy = shipped.predict(messages=[{"role": "user", "content": "hi"}])
    hard = shipped.predict(prompt="Prove rigorously that every finite integral domain is a field, "
                                  "then derive a counterexample showing finiteness is needed.")
    for pred in (easy, hard):
        assert isinstance(pred, Prediction) and pred.tier in (1, 2, 3, 4)
        assert len(pred.probs) == 4 and abs(sum(pred.probs) - 1) < 1e-5
    assert easy.tier == 1
    assert hard.tier >= 3 and np.argmax(hard.probs) + 1 == 4


def test_whole_conversation_is_read(shipped):
    task = {"role": "user", "content": "What is the capital of Peru?"}
    alone = shipped.predict(messages=[task])
    with_context = shipped.predict(messages=[{"role": "system", "content": "You are an expert tutor."},
                                             {"role": "user", "content": "hello"},
                                             {"role": "assistant", "content": "Hi! How can I help?"}, task])
    assert alone.probs != with_context.probs


def test_decide_shift_and_bias(shipped):
    probs = [0.7, 0.2, 0.07, 0.03]
    base = shipped.level_from_probs(probs)
    assert shipped.level_from_probs(probs, threshold_shift={2: -1.0}) >= 2
    assert shipped.level_from_probs(probs, threshold_shift={2: -1.0, 3: -1.0, 4: -1.0}) == 4
    assert shipped.level_from_probs([0.0, 0.0, 0.0, 1.0], threshold_shift={2: 1.0, 3: 1.0, 4: 1.0}) == 4  # P>=k is 1.0
    assert shipped.level_from_probs(probs, bias=+10) == 4 and shipped.level_from_probs(probs, bias=-10) == 1
    assert shipped.level_from_probs(probs, bias=1) == min(4, base + 1)
    with pytest.raises(ValueError):
        shipped.level_from_probs(probs, threshold_shift={1: 0.1})
    pred = shipped.predict(prompt="hi", threshold_shift={2: -0.2})
    assert pred.thresholds[2] == pytest.approx(max(0.0, shipped.thresholds[2] - 0.2))


def test_predict_many_matches_predict(shipped, splits):
    rows = splits["test"][:40]
    many = shipped.predict_many(rows)
    single = [shipped.predict(r.get("messages"), r.get("prompt")) for r in rows]
    assert [p.tier for p in many] == [p.tier for p in single]
    assert np.allclose([p.probs for p in many], [p.probs for p in single], atol=1e-5)


def test_concurrent_predictions_are_consistent(shipped, splits):
    rows = splits["heldout"][:64]
    expected = [shipped.predict(r.get("messages"), r.get("prompt")).probs for r in rows]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda r: shipped.predict(r.get("messages"), r.get("prompt")).probs, rows * 3))
    assert np.allclose(got, expected * 3, atol=1e-6)


def test_load_from_explicit_dir(shipped):
    from classifier.runtime import PACKAGED_MODEL_DIR
    again = ComplexityClassifier.load(str(PACKAGED_MODEL_DIR))
    assert again.version == shipped.version


def test_single_request_decision_matches_the_vectorised_one():
    """The gateway's float path and the evaluation's numpy path must route identically,
    including probabilities that sit exactly on a threshold."""
    rng = np.random.default_rng(0)
    for i in range(5000):
        probs = rng.dirichlet(np.ones(4) * rng.uniform(0.1, 3)).astype(np.float32)
        if i % 5 == 0:  # thresholds exactly at the cumulative probabilities
            thresholds = {2: float(probs[1:].sum()), 3: float(probs[2:].sum()), 4: float(probs[3])}
        else:
            thresholds = {k: float(rng.uniform()) for k in (2, 3, 4)}
        shift = {3: float(rng.uniform(-0.5, 0.5))} if i % 3 == 0 else None
        expected = int(levels_from_probs(probs.astype(np.float64)[None, :], shifted(thresholds, shift))[0])
        assert level_from_probs(probs, thresholds, shift) == expected


def test_prediction_without_outcomes_equals_the_batch_estimate(shipped, splits):
    """predict's float path (no outcomes learned) gives exactly what estimate's numpy path gives."""
    assert not shipped.outcomes.learned
    for row in splits["test"][:40]:
        pred = shipped.predict(row.get("messages"), row.get("prompt"))
        text, numeric = extract(row.get("messages"), row.get("prompt"))
        prior, a, probs = shipped.estimate([text], numeric[None, :])
        assert (pred.prior, pred.probs, pred.p_good, pred.evidence, pred.need) == \
            (prior[0].tolist(), probs[0].tolist(), a.p_good[0].tolist(), a.weight[0].tolist(), a.need[0].tolist())
        assert pred.tier == shipped.level_from_probs(probs[0])
