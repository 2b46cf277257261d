"""The pure decision function: every rule, and the rules list that /v1/route shows."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from policies.config import Budgets, TenantPolicy
from policies.decision import UsageSnapshot, decide, level_from_scores
from policy_helpers import TIERS
from wire.errors import OpenAIError

NONE = UsageSnapshot()
SCORES = [0.5, 0.3, 0.15, 0.05]  # P(level 1..4)


def run(policy=TenantPolicy(), model="auto", scores=None, tier=None, usage=NONE):
    return decide(policy, model, scores, tier, TIERS, usage)


def test_classifier_tier_maps_to_cheapest_tier_at_or_above_its_level():
    d = run(tier=2)
    assert (d.tier_name, d.rules, d.priority, d.max_tokens_cap) == ("medium", [], "interactive", None)
    assert run(tier=4).tier_name == "expert"


def test_quality_preference_moves_the_threshold_both_ways():
    assert run(scores=SCORES, tier=1).tier_name == "small"          # neutral: classifier's own tier
    up = run(TenantPolicy(quality_preference=1.0), scores=SCORES, tier=1)
    assert up.tier_name == "large" and up.rules[0].startswith("quality_preference=+1.00: threshold 0.10")
    down = run(TenantPolicy(quality_preference=-1.0), scores=[0.1, 0.2, 0.3, 0.4], tier=3)
    assert down.tier_name == "small"


@given(st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4).filter(lambda s: sum(s) > 0.01),
       st.floats(-1, 1), st.floats(-1, 1))
def test_more_quality_preference_never_picks_a_cheaper_level(scores, q1, q2):
    lo, hi = sorted((q1, q2))
    assert level_from_scores(scores, 0.5 - 0.4 * hi) >= level_from_scores(scores, 0.5 - 0.4 * lo)


def test_tier_bias_shifts_and_stays_inside_the_tier_list():
    d = run(TenantPolicy(tier_bias=1), tier=2)
    assert d.tier_name == "large" and d.rules == ["tier_bias=+1: medium -> large"]
    assert run(TenantPolicy(tier_bias=-3), tier=2).tier_name == "small"


def test_min_and_max_tier_clamp_with_a_rule():
    d = run(TenantPolicy(min_tier="medium"), tier=1)
    assert d.tier_name == "medium" and d.rules == ["min_tier=medium: small -> medium"]
    d = run(TenantPolicy(max_tier="medium"), model="expert")
    assert d.tier_name == "medium" and d.rules == ["max_tier=medium: expert -> medium"]


def test_disallowed_classifier_choice_moves_to_nearest_allowed_tier_above_first():
    d = run(TenantPolicy(allowed_tiers=("small", "large")), tier=2)
    assert d.tier_name == "large" and "allowed_tiers: medium not allowed -> large" in d.rules
    assert run(TenantPolicy(allowed_tiers=("small", "medium")), tier=4).tier_name == "medium"


def test_explicit_disallowed_tier_or_model_is_403():
    with pytest.raises(OpenAIError) as err:
        run(TenantPolicy(allowed_tiers=("small",)), model="large")
    assert err.value.status == 403 and err.value.code == "model_not_allowed"
    with pytest.raises(OpenAIError):
        run(TenantPolicy(allowed_models=("smollm2-135m",)), model="huge-model")
    # a model served by several tiers means the cheapest permitted one
    assert run(TenantPolicy(allowed_tiers=("medium",)), model="smollm2-135m").tier_name == "medium"


def test_unknown_model_is_404():
    with pytest.raises(OpenAIError) as err:
        run(model="gpt-9")
    assert err.value.status == 404 and err.value.code == "model_not_found"


def test_pinned_route_always_maps_to_its_tier():
    policy = TenantPolicy(pinned_routes={"fast": "small", "best": "expert"}, tier_bias=1,
                          budgets=Budgets(daily_soft=1))
    d = run(policy, model="best", usage=UsageSnapshot(10, 10))
    assert d.tier_name == "expert" and d.rules == ["pinned_route: best -> expert"]


def test_soft_budget_downgrades_one_allowed_tier():
    policy = TenantPolicy(budgets=Budgets(daily_soft=1_000_000, monthly_soft=50_000_000))
    assert run(policy, tier=3, usage=UsageSnapshot(999_999, 0)).tier_name == "large"
    d = run(policy, tier=3, usage=UsageSnapshot(1_000_000, 0))
    assert d.tier_name == "medium" and d.rules == ["soft_budget: daily soft budget 1.00 USD reached: large -> medium"]
    assert run(policy, tier=3, usage=UsageSnapshot(0, 50_000_000)).tier_name == "medium"
    assert run(policy, model="large", usage=UsageSnapshot(1_000_000, 0)).tier_name == "medium"
    cheapest = run(policy, tier=1, usage=UsageSnapshot(1_000_000, 0))
    assert cheapest.tier_name == "small" and "already on the cheapest" in cheapest.rules[0]
    skip = TenantPolicy(allowed_tiers=("small", "large"), budgets=Budgets(daily_soft=1))
    assert run(skip, tier=3, usage=UsageSnapshot(5, 0)).tier_name == "small"  # one *allowed* tier down
    off = TenantPolicy(budgets=Budgets(daily_soft=1), soft_budget_action="none")
    assert run(off, tier=3, usage=UsageSnapshot(5, 0)).tier_name == "large"


def test_caps_priority_and_sampling_come_from_the_policy():
    d = run(TenantPolicy(max_tokens=64, priority="batch", sampling_rate=0.25), tier=1)
    assert (d.max_tokens_cap, d.priority, d.sampling_rate) == (64, "batch", 0.25)
    assert d.rules == ["max_tokens_cap=64", "priority=batch", "sampling_rate=0.25"]


def test_no_allowed_tier_at_all_is_403():
    with pytest.raises(OpenAIError) as err:
        run(TenantPolicy(allowed_tiers=("expert",), max_tier="large"), tier=1)
    assert err.value.status == 403
