"""Calibration hits its targets on a sample; economics read prices from the config."""
import numpy as np
import pytest

from classifier import calibration
from classifier import economics as econ
from classifier.decision import levels_from_probs
from classifier.evaluation import probabilities
from classifier.metrics import macro_f1


@pytest.fixture(scope="module")
def sample(shipped, splits):
    rows = splits["validation"]
    labels = np.array([r["tier"] for r in rows])
    costs = econ.cost_matrix(rows, econ.tier_prices(), labels)
    return probabilities(shipped, rows), labels, costs


def test_prices_come_from_the_config():
    prices = econ.tier_prices()
    assert set(prices) == {1, 2, 3, 4}
    assert prices[1][0] < prices[2][0] < prices[3][0] < prices[4][0]


def test_quality_target_is_met_at_lower_cost_than_top_tier(sample):
    probs, labels, costs = sample
    th = calibration.for_quality(probs, labels, costs, quality=0.95, max_under_routing=0.05)
    got = calibration.report(probs, labels, costs, th)
    assert got["quality"] >= 0.95 and got["under_routing_rate"] <= 0.05
    top, _ = econ.outcome(np.full(len(labels), 4), labels, costs)
    assert got["mean_cost_usd"] * len(labels) < top


@pytest.mark.slow
def test_accuracy_target_keeps_the_under_routing_bound_and_beats_fixed_points(sample):
    probs, labels, costs = sample
    th = calibration.for_accuracy(probs, labels, max_under_routing=0.02)
    routed = levels_from_probs(probs, np.array([th[k] for k in (2, 3, 4)]))
    assert calibration.report(probs, labels, costs, th)["under_routing_rate"] <= 0.02
    best = macro_f1(labels, routed)
    for fixed in ([0.5, 0.5, 0.5], [0.25, 0.25, 0.75], [0.1, 0.1, 0.1]):  # any grid point within the bound is no better
        other = levels_from_probs(probs, np.array(fixed))
        if np.mean(other[labels >= 3] == 1) <= 0.02:
            assert best >= macro_f1(labels, other)
    # an impossible bound falls back to the least under-routing on the grid
    strict = calibration.for_accuracy(probs, labels, max_under_routing=-1.0)
    assert calibration.report(probs, labels, costs, strict)["under_routing_rate"] == 0.0


def test_share_target_is_met(sample):
    probs, _, costs = sample
    target = [0.4, 0.3, 0.2, 0.1]
    got = calibration.report(probs, None, costs, calibration.for_shares(probs, target))["share_per_tier"]
    for tier, share in zip("1234", target):
        assert abs(got[tier] - share) <= 0.06, got


def test_cost_target_is_met(sample):
    probs, _, costs = sample
    low, high = costs[:, 0].mean(), costs[:, 3].mean()
    target = low + 0.3 * (high - low)
    th = calibration.for_cost(probs, costs, target)
    mean_cost = calibration.report(probs, None, costs, th)["mean_cost_usd"]
    assert target * 0.8 <= mean_cost <= target


def test_decision_is_monotone_in_threshold(sample):
    probs, labels, _ = sample
    routed = levels_from_probs(probs, np.repeat(np.linspace(0, 1, 11)[:, None], 3, axis=1))
    quality = (routed >= labels[None, :]).mean(axis=1)
    assert np.all(np.diff(quality) <= 1e-12) and quality[0] == 1.0


def test_baselines_bound_the_router(sample):
    probs, labels, costs = sample
    curve = econ.sweep_curve(probs, labels, costs)
    oracle = econ.oracle_cost_at(labels, costs, 0.95)
    assert oracle <= econ.cheapest_at(curve, 0.95)
    assert 0.0 <= econ.apgr(curve, labels, costs) <= 1.0
    assert econ.random_cost_at(labels, costs, 1.0) == pytest.approx(costs[:, 3].sum())
