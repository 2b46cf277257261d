"""Per-tier P(good enough): prior from the classifier, moved by similar outcomes and fitted models."""
import numpy as np
import pytest

from classifier.features import FEATURE_NAMES, extract_many
from classifier.outcome_fit import fit
from classifier.outcome_model import (FAIL, PASS, UNKNOWN, OutcomeModel, known_levels, prior_p_good, target_labels,
                                      probs_from_p_good)
from classifier.static_vectors import DIMS

KIND = [f"What is the sales tax in {s}?" for s in ("Ohio", "Texas", "Utah", "Maine", "Iowa", "Idaho", "Oregon",
                                                    "Nevada", "Kansas", "Alaska", "Georgia", "Vermont")]
OTHER = ["Say hello.", "Hi there!", "Name a fruit.", "What color is the sky?", "Tell me a joke.",
         "Which continent is Kenya in?", "Hello, how are you?", "Thanks, bye!"]


@pytest.mark.parametrize("outcomes, row", [
    ({1: True}, [PASS] * 4), ({4: False}, [FAIL] * 4), ({1: False, 4: True}, [FAIL, UNKNOWN, UNKNOWN, PASS]),
    ({2: True, 3: False}, [FAIL, PASS, FAIL, PASS]),  # observed beats implied, both ways
])
def test_a_pass_holds_above_and_a_failure_below(outcomes, row):
    assert known_levels(outcomes).tolist() == row


def test_class_probabilities_from_p_good_give_back_p_good():
    p = np.array([[0.2, 0.5, 0.5, 0.9], [0.97, 0.99, 1.0, 1.0]])
    probs = probs_from_p_good(p)
    assert probs.sum(1) == pytest.approx([1.0, 1.0])
    assert prior_p_good(probs)[:, :3] == pytest.approx(p[:, :3])


def _rows(texts):
    return extract_many([{"prompt": t} for t in texts])


def test_without_outcomes_the_classifier_decides_alone(shipped):
    texts, numeric = _rows(KIND[:2] + OTHER[:2])
    prior = shipped.probabilities(texts, numeric)
    good, weight = OutcomeModel.empty(len(FEATURE_NAMES), DIMS).estimate(numeric, prior, DIMS)
    assert good == pytest.approx(np.cumsum(prior, 1))
    assert not weight.any()
    plain = shipped.predict(prompt=KIND[0])
    assert plain.probs == pytest.approx(plain.prior) and plain.p_good == pytest.approx(np.cumsum(plain.prior))


def test_a_kind_seen_failing_goes_up_and_the_rest_stays(shipped):
    seen, unseen = KIND[:10], KIND[10:]
    texts, numeric = _rows(seen + OTHER)
    known = np.stack([known_levels({1: False, 4: True})] * len(seen) + [known_levels({1: True})] * len(OTHER))
    model = fit(numeric, shipped.probabilities(texts, numeric), known, DIMS)
    learned = shipped.with_outcomes(model)
    for text in unseen:
        before, after = shipped.predict(prompt=text), learned.predict(prompt=text)
        # levels 2 and 3 are untested, so "up" is the next tier above level 1, whichever it is
        assert before.tier == 1 and after.tier >= 2, (text, after.p_good)
        assert after.p_good[0] < before.p_good[0] - 0.3 and sum(after.evidence) > 0
    for text in ("Name a colour.", "Say goodbye."):
        assert learned.predict(prompt=text).tier == 1


def test_fitted_levels_survive_a_save_and_load(shipped, tmp_path):
    rng = np.random.default_rng(1)
    texts, numeric = _rows(KIND + OTHER)
    numeric = np.vstack([numeric] * 3)
    known = np.where(rng.random((len(numeric), 4)) < 0.5, PASS, FAIL).astype(np.int8)
    probs = np.vstack([shipped.probabilities(texts, numeric[:len(texts)])] * 3)
    model = fit(numeric, probs, known, DIMS)
    assert all(f is not None for f in model.fits)
    model.save(tmp_path)
    again = OutcomeModel.load(tmp_path, len(FEATURE_NAMES), DIMS)
    assert again.estimate(numeric, probs, DIMS)[0] == pytest.approx(model.estimate(numeric, probs, DIMS)[0])
    with pytest.raises(ValueError, match="other features"):
        OutcomeModel.load(tmp_path, len(FEATURE_NAMES) + 1, DIMS)


def test_a_level_without_both_kinds_of_outcome_has_no_fitted_model(shipped):
    texts, numeric = _rows(KIND + OTHER)
    known = np.stack([known_levels({1: True})] * len(texts))
    assert fit(numeric, shipped.probabilities(texts, numeric), known, DIMS).fits == (None,) * 4


def test_target_labels_count_only_pairs_where_both_levels_answered():
    known = np.stack([known_levels(o) for o in ({1: False, 4: True}, {1: False, 4: False}, {1: True}, {1: False})])
    hits, labelled = target_labels(known, 3, "gain")
    assert hits[:, 0].tolist() == [True, False, False, False]
    assert labelled[:, 0].tolist() == [True, True, True, False]  # {1: False} alone knows nothing of the top
    assert not labelled[:, 3].any()  # the top never gains on itself
    fails, seen = target_labels(known, 3, "fail")
    assert fails[:, 0].tolist() == [True, True, False, True] and seen[:, 0].all()


def test_a_kind_every_tier_fails_stays_cheap_when_the_gain_is_learned(shipped):
    """The top tier fails it too: sending it up costs more and gains nothing. P(cheap fails), the
    target before, sends it up."""
    seen, unseen = KIND[:10], KIND[10:]
    texts, numeric = _rows(seen + OTHER)
    known = np.stack([known_levels({1: False, 4: False})] * len(seen) + [known_levels({1: True})] * len(OTHER))
    probs = shipped.probabilities(texts, numeric)
    gain, fail = (shipped.with_outcomes(fit(numeric, probs, known, DIMS, target=t)) for t in ("gain", "fail"))
    for text in unseen:
        assert gain.predict(prompt=text).need[0] < 0.1 < 0.3 < fail.predict(prompt=text).need[0], text


def test_need_falls_with_the_level_and_is_zero_at_the_top(shipped):
    texts, numeric = _rows(KIND + OTHER)
    known = np.stack([known_levels({1: False, 3: False, 4: True})] * len(KIND) + [known_levels({2: True})] * len(OTHER))
    model = fit(numeric, shipped.probabilities(texts, numeric), known, DIMS, texts=texts)
    need = model.assess(numeric, shipped.probabilities(texts, numeric), DIMS, texts).need
    assert (np.diff(need, axis=1) <= 1e-12).all() and not need[:, 3].any()
    assert need[:len(KIND), 2].min() > 0.5 and need[len(KIND):, 0].max() < 0.5


def test_gain_models_and_grams_survive_a_save_and_load(shipped, tmp_path):
    rng = np.random.default_rng(2)
    texts, numeric = _rows(KIND + OTHER)
    texts, numeric = texts * 3, np.vstack([numeric] * 3)
    known = np.stack([known_levels({1: bool(a), 4: bool(b)}) for a, b in rng.random((len(texts), 2)) < 0.5])
    probs = shipped.probabilities(texts, numeric)
    model = fit(numeric, probs, known, DIMS, texts=texts)
    assert model.gain_fits[0] is not None and model.grams is not None and model.grams.fitted[0]
    model.save(tmp_path)
    again = OutcomeModel.load(tmp_path, len(FEATURE_NAMES), DIMS)
    assert again.assess(numeric, probs, DIMS, texts).need == pytest.approx(model.assess(numeric, probs, DIMS, texts).need)
