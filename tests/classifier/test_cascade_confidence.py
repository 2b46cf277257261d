"""The cascade's confidence (the narrowest margin of an answer) and its threshold from verdicts."""
import math

import numpy as np
import pytest

from classifier.cascade_calibration import calibrate_threshold, guard, replayed
from classifier.cascade_confidence import DEFAULT_THRESHOLD, MAX_MARGIN, answer_confidence, token_margin

# -- the statistic ---------------------------------------------------------------------------------


def test_the_narrowest_gap_to_a_rival_token_scores_the_answer():
    logprobs = [-0.1, -0.7, -0.2]
    tops = [[-0.1, -3.0, -4.0], [-0.7, -0.9, -2.0], [-0.2, -2.2, -3.0]]
    assert answer_confidence(logprobs, tops) == pytest.approx(0.2)  # the second token: -0.7 against -0.9


def test_a_tie_scores_zero_and_a_sampled_token_below_the_top_scores_negative():
    assert token_margin(-1.135, [-1.135, -1.135, -2.1]) == 0.0
    assert token_margin(-1.5, [-0.4, -1.5, -2.0]) == pytest.approx(-1.1)
    assert token_margin(-6.0, [-0.4, -1.5, -2.0]) == pytest.approx(-5.6)  # chosen outside the top list


def test_without_alternatives_the_narrowest_margin_the_chosen_logprob_allows():
    # p = 0.9: at most 0.1 left for a rival, so the margin is at least log(9)
    assert answer_confidence([math.log(0.9)]) == pytest.approx(math.log(9))
    assert answer_confidence([0.0]) == MAX_MARGIN  # nothing left for a rival: capped, finite
    assert answer_confidence([math.log(0.9), math.log(0.4)]) < 0  # p = 0.4: a rival may hold 0.6


def test_a_surer_answer_scores_higher_and_an_empty_one_lowest():
    sure = answer_confidence([-0.01, -0.02], [[-0.01, -5.0], [-0.02, -4.5]])
    unsure = answer_confidence([-0.01, -0.6], [[-0.01, -5.0], [-0.6, -0.8]])
    assert sure > unsure > answer_confidence([])
    assert answer_confidence([]) == float("-inf")


def test_top_lists_that_do_not_match_the_tokens_are_not_read():
    # one list for two tokens: the bound from the chosen logprobs alone is used for both
    assert answer_confidence([math.log(0.9), math.log(0.8)], [[-0.1, -0.2]]) == pytest.approx(math.log(4))


def test_the_default_threshold_is_a_finite_margin():
    assert math.isfinite(DEFAULT_THRESHOLD) and -MAX_MARGIN <= DEFAULT_THRESHOLD <= MAX_MARGIN

# -- calibration -----------------------------------------------------------------------------------


def _verdicts(n=400):
    """Confidence 0..n-1: below n/4 the cheap answer is wrong and the next tier's right; above it
    both are right except every tenth cheap answer."""
    conf = np.arange(n, dtype=float)
    cheap = (conf >= n // 4) & (np.arange(n) % 10 != 0)
    strong = np.ones(n, bool)
    return conf, cheap, strong


def test_the_threshold_keeps_only_answers_sure_enough_for_the_target():
    conf, cheap, strong = _verdicts()
    tau = calibrate_threshold(conf, cheap, strong, target=0.95)
    assert 100 <= tau < 400  # every wrong answer from the low band is escalated
    kept = replayed(tau, conf, cheap, strong)
    assert kept["quality"] >= 0.95 and 0 < kept["escalated"] < 1


def test_a_stricter_target_escalates_more():
    conf, cheap, strong = _verdicts()
    lax, strict = (calibrate_threshold(conf, cheap, strong, target=t) for t in (0.90, 0.99))
    assert replayed(strict, conf, cheap, strong)["escalated"] > replayed(lax, conf, cheap, strong)["escalated"]


def test_a_cheap_tier_as_good_as_the_next_keeps_everything_and_a_useless_one_little_or_nothing():
    conf, wrong, right = np.arange(100, dtype=float), np.zeros(100, bool), np.ones(100, bool)
    assert calibrate_threshold(conf, right, right) == 0.0  # the least seen
    # a useless tier keeps no more wrong answers than the target lets go, and none for 100%
    assert replayed(calibrate_threshold(conf, wrong, right), conf, wrong, right)["quality"] >= 0.95
    assert calibrate_threshold(conf, wrong, right, target=1.0) == float("inf")
    assert calibrate_threshold([], [], []) == float("inf")


def test_a_next_tier_verdict_nobody_asked_for_counts_as_right():
    conf, cheap, _ = _verdicts()
    strong_wrong_where_cheap_wrong = cheap.copy()  # escalating would gain nothing
    unknown = [None] * len(conf)
    assert calibrate_threshold(conf, cheap, unknown) == calibrate_threshold(conf, cheap, np.ones(len(conf), bool))
    assert calibrate_threshold(conf, cheap, unknown) > calibrate_threshold(conf, cheap, strong_wrong_where_cheap_wrong)


def test_the_guard_refuses_a_threshold_that_misses_the_target_on_held_out_verdicts():
    conf, cheap, strong = _verdicts()
    verdict = guard(serving=150.0, candidate=0.0, confidence=conf, cheap_good=cheap, strong_good=strong)
    assert verdict["candidate"]["escalated"] == 0.0 and not verdict["target_met"] and not verdict["accepted"]


def test_the_guard_refuses_one_that_escalates_more_than_a_serving_one_meeting_the_target():
    conf, cheap, strong = _verdicts()
    # escalating half keeps 45% of answers wrong one time in ten: 95% quality
    verdict = guard(serving=200.0, candidate=300.0, confidence=conf, cheap_good=cheap, strong_good=strong)
    assert verdict["target_met"] and not verdict["accepted"]
    assert guard(serving=300.0, candidate=200.0, confidence=conf, cheap_good=cheap, strong_good=strong)["accepted"]


def test_the_guard_takes_a_stricter_one_when_the_serving_one_misses_the_target():
    conf, cheap, strong = _verdicts()
    assert guard(serving=0.0, candidate=200.0, confidence=conf, cheap_good=cheap, strong_good=strong)["accepted"]
    assert not guard(serving=0.0, candidate=50.0, confidence=conf, cheap_good=cheap, strong_good=strong)["accepted"]


def test_the_policy_default_is_the_measured_threshold_and_its_range_holds_every_margin():
    from policies.routing_policy import CASCADE_MAX_MARGIN, CASCADE_THRESHOLD

    assert CASCADE_THRESHOLD == DEFAULT_THRESHOLD  # policies may not import classifier: kept equal here
    assert CASCADE_MAX_MARGIN == MAX_MARGIN
