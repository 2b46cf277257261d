"""Scores -> level: calibrated thresholds, then the quality shift, then the tenant's preference,
each a shift on the one before (never a replacement), and one rule for "cheapest tier"."""
from __future__ import annotations

from hypothesis import given, strategies as st

from classifier.decision import level_from_probs
from gateway.core.policy_seam import OpenPolicy
from policies.config import TenantPolicy
from policies.decision import BASE_THRESHOLDS, decide_route, effective_thresholds, level_for, tier_index_for_level
from policies.decision_types import RouteRequest, RoutedBy, Signal, StepKind
from tests.policies.policy_helpers import TIERS

CALIBRATED = {2: 0.3, 3: 0.6, 4: 0.8}
SCORES = (0.60, 0.15, 0.20, 0.05)  # P(>=2) = 0.4, P(>=3) = 0.25, P(>=4) = 0.05


def route(preference=0.0, shift=None, scores=SCORES, thresholds=CALIBRATED, tiers=TIERS):
    signal = Signal(level_for(scores, thresholds or BASE_THRESHOLDS), scores, thresholds, shift)
    return decide_route(TenantPolicy(quality_preference=preference), RouteRequest("auto", signal, explain=True), tiers)


def thresholds_step(decision):
    return next(s.detail for s in decision.steps if s.kind is StepKind.THRESHOLDS)


def test_calibrated_thresholds_decide_not_a_fixed_one():
    # 0.4 >= 0.3 calibrated: level 2; a fixed 0.5 would have said level 1
    assert route().tier_name == "medium"
    assert route(thresholds=None).tier_name == "small"


def test_preference_shifts_the_calibrated_thresholds_and_keeps_them():
    # a small preference moves 0.3 to 0.26: still level 2 (recomputing from raw scores with one
    # threshold of 0.5 - 0.04 = 0.46 on P(level > 1) = 0.4 would have dropped it to level 1)
    d = route(preference=0.1)
    assert d.tier_name == "medium"
    th = thresholds_step(d)
    assert th["calibrated"] == {2: 0.3, 3: 0.6, 4: 0.8} and th["preference_shift"] == -0.04
    assert th["effective"] == {2: 0.26, 3: 0.56, 4: 0.76}
    assert route(preference=1.0).tier_name == "large"    # 0.25 >= 0.6 - 0.4
    assert route(preference=-0.5).tier_name == "small"   # 0.4 < 0.3 + 0.2


def test_quality_shift_and_preference_add_up():
    shift = {3: -0.3}  # the monitor moves borderline level-2 traffic up to level 3
    d = route(shift=shift)
    assert d.tier_name == "medium"                        # 0.25 < 0.6 - 0.3
    assert route(preference=0.5, shift=shift).tier_name == "large"   # 0.25 >= 0.6 - 0.3 - 0.2
    th = thresholds_step(route(preference=0.5, shift=shift))
    assert th["quality_shift"] == {3: -0.3} and th["effective"][3] == 0.1
    assert effective_thresholds(CALIBRATED, {2: -1.0}, -1.0) == {2: 0.0, 3: 1.0, 4: 1.0}  # clipped to [0, 1]


def test_quality_shift_is_the_classifiers_choice_and_remembers_the_unshifted_tier():
    d = route(shift={2: -0.1, 3: -0.5})
    assert (d.tier_name, d.routed_by, d.baseline_tier, d.unshifted_tier) == ("large", RoutedBy.CLASSIFIER,
                                                                            "large", "medium")
    assert route(shift={4: -0.01}).unshifted_tier is None  # the shift changed nothing


def test_tenant_preference_is_a_policy_move_against_the_classifiers_choice():
    d = route(preference=1.0)
    assert (d.tier_name, d.routed_by, d.baseline_tier) == ("large", RoutedBy.POLICY, "medium")


@given(st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4).filter(lambda s: sum(s) > 0.01),
       st.fixed_dictionaries({k: st.floats(0.0, 1.0) for k in (2, 3, 4)}))
def test_level_agrees_with_the_classifiers_own_decision(raw, thresholds):
    scores = [x / sum(raw) for x in raw]
    assert level_for(scores, thresholds) == level_from_probs(scores, thresholds)


class _Tier:
    def __init__(self, name, level):
        self.name, self.level, self.model = name, level, f"model-{name}"


def test_one_rule_for_the_cheapest_tier_at_or_above_a_level():
    gappy = [_Tier("low", 1), _Tier("high", 3)]  # no level-2 or level-4 tier
    levels = [t.level for t in gappy]
    assert [tier_index_for_level(levels, lv) for lv in (1, 2, 3, 4)] == [0, 1, 1, 1]
    assert tier_index_for_level(levels, 1, among=[1]) == 1 and tier_index_for_level(levels, 4, among=[0]) == 0
    open_policy = OpenPolicy()
    for level in (1, 2, 3, 4):
        request = RouteRequest("auto", Signal(level))
        expected = gappy[tier_index_for_level(levels, level)].name
        assert open_policy.decide(None, request, gappy).tier_name == expected
        assert decide_route(TenantPolicy(), request, gappy).tier_name == expected
    # the open policy sorts a config's tiers itself (the config may list them in any order)
    assert open_policy.decide(None, RouteRequest("auto", Signal(2)), list(reversed(gappy))).tier_name == "high"


TARGETS = {0.9: 0.3, 0.95: 0.2, 0.99: 0.05}  # quality target -> calibrated threshold on the gain forgone


def targeted(target, scores=SCORES):
    signal = Signal(level_for(scores, CALIBRATED), scores, CALIBRATED, None, TARGETS)
    return decide_route(TenantPolicy(quality_target=target), RouteRequest("auto", signal, explain=True), TIERS)


def test_a_tenants_quality_target_picks_the_thresholds_calibrated_for_it():
    # P(>=2) = 0.4 is the gain forgone at level 1, 0.25 at level 2, 0.05 at level 3
    assert targeted(0.9).tier_name == "medium"     # 0.25 < 0.3 <= 0.4
    assert targeted(0.95).tier_name == "large"     # 0.05 < 0.2 <= 0.25
    step = thresholds_step(targeted(0.95))
    assert step["calibrated"] == {2: 0.2, 3: 0.2, 4: 0.2} and step["quality_target"] == 0.95
    assert step["target_calibrated"] is True
    # an uncalibrated target rounds up to the next calibrated one, never down to a laxer one
    assert thresholds_step(targeted(0.91))["calibrated"] == {2: 0.2, 3: 0.2, 4: 0.2}
    assert thresholds_step(targeted(0.999))["calibrated"] == {2: 0.05, 3: 0.05, 4: 0.05}
    d = targeted(0.99)
    assert (d.tier_name, d.routed_by, d.baseline_tier) == ("expert", RoutedBy.POLICY, "medium")  # 0.05 >= 0.05


def test_without_a_calibration_the_target_is_shown_and_the_classifiers_thresholds_stay():
    signal = Signal(level_for(SCORES, CALIBRATED), SCORES, CALIBRATED)
    d = decide_route(TenantPolicy(quality_target=0.95), RouteRequest("auto", signal, explain=True), TIERS)
    step = thresholds_step(d)
    assert step["calibrated"] == CALIBRATED and step["target_calibrated"] is False and step["quality_target"] == 0.95
