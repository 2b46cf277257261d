"""classifier/cascade_scores.py, the core of benchmarks/cascade_outcomes.py, on a tiny synthetic set:
router, cascade and both compared."""
import numpy as np
import pytest

from classifier.cascade_scores import BUDGETS, compare

N = 100
WEAK = (np.arange(N) % 4 == 0).astype(float)  # the cheap tier is right on 25
STRONG = np.where(np.arange(N) < 40, 1.0, WEAK)  # the next one also on rows 0..39: 30 gains
GAIN = STRONG - WEAK
CHEAP, DEAR = np.full(N, 1.0), np.full(N, 10.0)


def _compare(router, confidence):
    return compare(WEAK, STRONG, CHEAP, DEAR, router, confidence, np.random.default_rng(0))


def test_a_confidence_that_flags_the_gains_saves_most_strong_calls():
    figures = _compare(np.zeros(N), -GAIN)
    # strong quality 0.55; 95% of it is 0.5225: 28 of the 30 gains escalated, 72% of strong calls saved
    assert figures["cascade"]["save95"] == pytest.approx(0.72)
    assert figures["router"]["save95"] < 0.4  # a constant router ranks at random
    # the combination can always fall back on the cascade alone (no request sent straight up)
    assert figures["router+cascade"]["save95"] >= figures["cascade"]["save95"]


def test_the_cascade_pays_its_cheap_attempts_and_a_router_as_good_does_not():
    figures = _compare(GAIN, -GAIN)
    assert figures["router"]["save95"] == figures["cascade"]["save95"]
    assert figures["router"]["cost_save95"] > figures["cascade"]["cost_save95"]
    assert figures["router"]["apgr_cost"] > figures["cascade"]["apgr_cost"]
    for b in BUDGETS:
        assert figures["router"][f"accuracy_at_cost_{b}"] >= figures["cascade"][f"accuracy_at_cost_{b}"]


def test_an_inverted_confidence_recovers_the_gap_last():
    good, bad = _compare(np.zeros(N), -GAIN)["cascade"], _compare(np.zeros(N), GAIN)["cascade"]
    assert bad["apgr"] < 0.5 < good["apgr"] and bad["save95"] < good["save95"]
