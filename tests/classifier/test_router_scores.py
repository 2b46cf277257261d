"""Scoring a router, as the RouteLLM paper scores routers (k best-scored to strong)."""
import numpy as np
import pytest

from classifier.router_scores import curve_metrics, fixed_point, summary

WEAK = np.array([1, 0, 0, 1, 0, 0, 1, 0, 0, 0], float)
STRONG = np.array([1, 1, 1, 1, 0, 1, 1, 0, 1, 0], float)  # gains on rows 1, 2, 5, 8


def test_a_ranking_by_the_gain_itself_recovers_the_gap_first():
    m = curve_metrics(STRONG * (1 - WEAK), WEAK, STRONG, np.random.default_rng(0))
    # PGR over k = 0..10: 0, .25, .5, .75, 1, then 1 to the end
    assert m["apgr"] == pytest.approx((0 + .25 + .5 + .75 + 7 * 1) / 11)
    assert (m["cpt50"], m["cpt80"]) == (0.2, 0.4)
    assert m["save95"] == pytest.approx(0.6)  # quality 0.7 = strong's at k = 4


def test_the_worst_ranking_recovers_the_gap_last():
    m = curve_metrics(-(STRONG * (1 - WEAK)), WEAK, STRONG, np.random.default_rng(0))
    assert m["cpt80"] == 1.0 and m["apgr"] < 0.3


def test_a_constant_score_is_a_random_order():
    rng = np.random.default_rng(5)
    weak, strong = (rng.random(4000) < 0.4).astype(float), (rng.random(4000) < 0.8).astype(float)
    assert curve_metrics(np.zeros(4000), weak, strong, rng)["apgr"] == pytest.approx(0.5, abs=0.03)


def test_fixed_routers_and_the_summary():
    assert fixed_point(WEAK, STRONG, True) == {"apgr": 1.0, "cpt50": 1.0, "cpt80": 1.0, "save95": 0.0}
    assert fixed_point(WEAK, STRONG, False)["save95"] is None  # always cheap never reaches 95%
    s = summary([{"apgr": 0.6, "x": None}, {"apgr": 0.7, "x": None}])
    assert s["apgr"]["mean"] == 0.65 and s["apgr"]["ci95"][0] < 0.6 and s["x"] is None
