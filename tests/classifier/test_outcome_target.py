"""The quality target's threshold on the gain forgone, calibrated on verdicts with a confidence bound."""
import numpy as np
import pytest

from classifier.outcome_model import FAIL, PASS
from classifier.outcome_target import TARGETS, calibrate, loss_bound, routed_levels, threshold_for

IN_PLAY = np.array([1, 4])


def _verdicts(n=2000, seed=0):
    """The top is right on 90%; the cheap level on those where a hidden need is low."""
    rng = np.random.default_rng(seed)
    hidden = rng.random(n)
    top = rng.random(n) < 0.9
    cheap = top & (rng.random(n) > hidden)
    known = np.full((n, 4), FAIL, np.int8)
    known[:, 0] = np.where(cheap, PASS, FAIL)
    known[:, 3] = np.where(top, PASS, FAIL)
    need = np.zeros((n, 4))
    need[:, 0] = 0.9 * hidden  # what a good model would say: P(top right AND cheap wrong)
    return need, known


def test_routing_takes_the_cheapest_level_within_the_threshold():
    need = np.array([[0.3, 0.2, 0.1, 0.0], [0.05, 0.0, 0.0, 0.0]])
    assert routed_levels(need, np.array([1, 2, 4]), 0.15).tolist() == [4, 1]
    assert routed_levels(need, np.array([1, 2, 4]), 0.25).tolist() == [2, 1]


def test_the_calibrated_threshold_keeps_the_target_on_fresh_verdicts():
    need, known = _verdicts(seed=1)
    thresholds = calibrate(need, known == PASS, IN_PLAY)
    assert (np.diff(thresholds) <= 1e-12).all()  # a stricter target never gets a laxer threshold
    fresh_need, fresh_known = _verdicts(seed=2)
    for target in (0.85, 0.9, 0.95):
        tau = threshold_for(TARGETS, thresholds, target)
        assert tau > 0  # something is sent to the cheap level
        rows = np.arange(len(fresh_known))
        routed = fresh_known[rows, routed_levels(fresh_need, IN_PLAY, tau) - 1] == PASS
        assert routed.mean() >= target * (fresh_known[:, 3] == PASS).mean() - 0.01


def test_the_bound_is_stricter_than_the_point_estimate():
    need, known = _verdicts(n=200, seed=3)
    lost, top = loss_bound(need, known == PASS, IN_PLAY, 0.3)
    rows = np.arange(len(known))
    point = top - np.mean(known[rows, routed_levels(need, IN_PLAY, 0.3) - 1] == PASS)
    assert lost > point


def test_a_target_nothing_cheaper_can_meet_sends_everything_up():
    need, known = _verdicts(n=300, seed=4)
    known[:, 0] = FAIL  # the cheap level never answers right
    assert calibrate(need, known == PASS, IN_PLAY)[-1] == 0.0
    assert routed_levels(need, IN_PLAY, 0.0).tolist().count(1) == int((need[:, 0] == 0).sum())


def test_threshold_for_rounds_up_to_a_calibrated_target():
    targets, thresholds = np.array([0.9, 0.95, 1.0]), np.array([0.3, 0.2, 0.0])
    assert threshold_for(targets, thresholds, 0.9) == 0.3
    assert threshold_for(targets, thresholds, 0.91) == pytest.approx(0.2)
    assert threshold_for(targets, thresholds, 0.5) == 0.3


def test_a_fitted_model_carries_its_calibration_once_it_has_enough_pairs(shipped):
    from classifier.features import extract_many
    from classifier.outcome_fit import MIN_CALIBRATION_ROWS, fit_calibrated
    from classifier.outcome_model import known_levels
    from classifier.static_vectors import DIMS

    hard = [f"What is {a} times {b} in base {c}?" for a, b, c in zip(range(31, 61), range(17, 47), [3, 5, 7] * 10)]
    easy = [f"Name a {thing}." for thing in ("fruit", "colour", "city", "river", "bird", "tree", "song", "sport",
                                             "planet", "metal")] * 3
    texts, numeric = extract_many([{"prompt": t} for t in hard + easy])
    known = np.stack([known_levels({1: False, 4: True})] * len(hard) + [known_levels({1: True, 4: True})] * len(easy))
    probs = shipped.probabilities(texts, numeric)
    model = fit_calibrated(numeric, probs, known, DIMS, np.array([1, 4]), texts=texts)
    assert len(known) >= MIN_CALIBRATION_ROWS and model.targets is not None
    assert model.threshold_for(0.95) >= model.threshold_for(0.99)
    learned = shipped.with_outcomes(model)
    assert learned.thresholds == {k: model.threshold_for(0.95) for k in (2, 3, 4)}
    assert learned.predict(prompt="What is 77 times 58 in base 3?").tier > 1  # levels 2, 3 untested: above 1
    assert learned.predict(prompt="Name a flower.").tier == 1
    few = fit_calibrated(numeric[:20], probs[:20], known[:20], DIMS, np.array([1, 4]))
    assert few.targets is None and shipped.with_outcomes(few).thresholds == shipped.thresholds
