"""The pure decision function: every tenant rule, routed_by, and the steps /v1/route shows."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from policies.budgets import Budgets
from policies.config import TenantPolicy
from policies.decision import UsageSnapshot, decide_route
from policies.decision_types import RouteRequest, RoutedBy, Signal, StepKind
from tests.policies.policy_helpers import TIERS
from wire.errors import OpenAIError

NONE = UsageSnapshot()


def run(policy=TenantPolicy(), model="auto", level=None, usage=NONE, scores=None, thresholds=None, shift=None):
    signal = Signal(level, scores, thresholds, shift) if level is not None else None
    return decide_route(policy, RouteRequest(model, signal, explain=True), TIERS, usage)


def kinds(decision):
    return [s.kind for s in decision.steps]


def step(decision, kind):
    return next(s.detail for s in decision.steps if s.kind is kind)


def test_classifier_level_maps_to_cheapest_tier_at_or_above_it():
    d = run(level=2)
    assert (d.tier_name, d.routed_by, d.priority, d.max_tokens_cap) == ("medium", RoutedBy.CLASSIFIER,
                                                                        "interactive", None)
    assert step(d, StepKind.CHOSEN) == {"tier": "medium", "routed_by": "classifier"}
    assert run(level=4).tier_name == "expert"


def test_tier_bias_shifts_and_stays_inside_the_tier_list():
    d = run(TenantPolicy(tier_bias=1), level=2)
    assert (d.tier_name, d.routed_by, d.baseline_tier) == ("large", RoutedBy.POLICY, "medium")
    assert step(d, StepKind.TIER_BIAS) == {"bias": 1, "from": "medium", "to": "large"}
    assert run(TenantPolicy(tier_bias=-3), level=2).tier_name == "small"


def test_min_and_max_tier_clamp_with_a_step():
    d = run(TenantPolicy(min_tier="medium"), level=1)
    assert d.tier_name == "medium" and step(d, StepKind.BOUNDS)["from"] == "small"
    d = run(TenantPolicy(max_tier="medium"), model="expert")
    assert (d.tier_name, d.routed_by, d.baseline_tier) == ("medium", RoutedBy.POLICY, "expert")
    assert step(d, StepKind.BOUNDS) == {"min_tier": None, "max_tier": "medium", "from": "expert", "to": "medium"}


def test_disallowed_classifier_choice_moves_to_nearest_allowed_tier_above_first():
    d = run(TenantPolicy(allowed_tiers=("small", "large")), level=2)
    assert d.tier_name == "large" and step(d, StepKind.ALLOWED_TIERS) == {"allowed": ["small", "large"],
                                                                          "wanted": "medium"}
    assert run(TenantPolicy(allowed_tiers=("small", "medium")), level=4).tier_name == "medium"


def test_explicit_disallowed_tier_or_model_is_403():
    with pytest.raises(OpenAIError) as err:
        run(TenantPolicy(allowed_tiers=("small",)), model="large")
    assert err.value.status == 403 and err.value.code == "model_not_allowed"
    with pytest.raises(OpenAIError):
        run(TenantPolicy(allowed_models=("smollm2-135m",)), model="huge-model")
    # a model served by several tiers means the cheapest permitted one
    d = run(TenantPolicy(allowed_tiers=("medium",)), model="smollm2-135m")
    assert (d.tier_name, d.routed_by) == ("medium", RoutedBy.EXPLICIT)


def test_unknown_model_is_404():
    with pytest.raises(OpenAIError) as err:
        run(model="gpt-9")
    assert err.value.status == 404 and err.value.code == "model_not_found"


def test_pinned_route_always_maps_to_its_tier():
    policy = TenantPolicy(pinned_routes={"fast": "small", "best": "expert"}, tier_bias=1,
                          budgets=Budgets(daily_soft=1))
    d = run(policy, model="best", usage=UsageSnapshot(10, 10))
    assert (d.tier_name, d.routed_by) == ("expert", RoutedBy.PINNED)
    assert step(d, StepKind.PINNED) == {"model": "best", "tier": "expert"}
    assert StepKind.SOFT_BUDGET not in kinds(d) and StepKind.TIER_BIAS not in kinds(d)


def test_soft_budget_downgrades_one_allowed_tier():
    policy = TenantPolicy(budgets=Budgets(daily_soft=1_000_000, monthly_soft=50_000_000))
    assert run(policy, level=3, usage=UsageSnapshot(999_999, 0)).tier_name == "large"
    d = run(policy, level=3, usage=UsageSnapshot(1_000_000, 0))
    assert (d.tier_name, d.routed_by) == ("medium", RoutedBy.POLICY)
    assert step(d, StepKind.SOFT_BUDGET) == {"reason": "daily soft budget 1.00 USD reached", "action": "downgrade",
                                             "from": "large", "to": "medium"}
    assert run(policy, level=3, usage=UsageSnapshot(0, 50_000_000)).tier_name == "medium"
    assert run(policy, model="large", usage=UsageSnapshot(1_000_000, 0)).tier_name == "medium"
    cheapest = run(policy, level=1, usage=UsageSnapshot(1_000_000, 0))
    assert cheapest.tier_name == "small" and step(cheapest, StepKind.SOFT_BUDGET)["to"] == "small"
    assert cheapest.routed_by is RoutedBy.CLASSIFIER  # nothing moved
    skip = TenantPolicy(allowed_tiers=("small", "large"), budgets=Budgets(daily_soft=1))
    assert run(skip, level=3, usage=UsageSnapshot(5, 0)).tier_name == "small"  # one *allowed* tier down
    off = TenantPolicy(budgets=Budgets(daily_soft=1), soft_budget_action="none")
    assert run(off, level=3, usage=UsageSnapshot(5, 0)).tier_name == "large"


def test_caps_priority_and_sampling_come_from_the_policy():
    d = run(TenantPolicy(max_tokens=64, priority="batch", sampling_rate=0.25), level=1)
    assert (d.max_tokens_cap, d.priority, d.sampling_rate) == (64, "batch", 0.25)
    assert step(d, StepKind.LIMITS) == {"max_tokens_cap": 64, "sampling_rate": 0.25, "priority": "batch"}
    assert StepKind.LIMITS not in kinds(run(level=1))


def test_no_allowed_tier_at_all_is_403():
    with pytest.raises(OpenAIError) as err:
        run(TenantPolicy(allowed_tiers=("expert",), max_tier="large"), level=1)
    assert err.value.status == 403


def test_no_classifier_output_means_the_cheapest_tier():
    d = run()
    assert d.tier_name == "small" and step(d, StepKind.LEVEL)["source"] == "no classifier output"


def test_explanation_is_structured_data_in_decision_order():
    d = run(TenantPolicy(tier_bias=1, max_tokens=10), level=2, scores=(0.1, 0.6, 0.2, 0.1),
            thresholds={2: 0.5, 3: 0.5, 4: 0.5})
    assert kinds(d) == [StepKind.SCORES, StepKind.THRESHOLDS, StepKind.LEVEL, StepKind.TIER_BIAS,
                        StepKind.CAPABILITIES, StepKind.CHOSEN, StepKind.LIMITS]
    assert all(isinstance(s["step"], str) for s in d.explain())


@given(st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4).filter(lambda s: sum(s) > 0.01),
       st.floats(-1, 1), st.floats(-1, 1))
def test_more_quality_preference_never_picks_a_cheaper_tier(raw, q1, q2):
    scores = tuple(x / sum(raw) for x in raw)
    lo, hi = sorted((q1, q2))
    cheap = run(TenantPolicy(quality_preference=lo), level=1, scores=scores)
    good = run(TenantPolicy(quality_preference=hi), level=1, scores=scores)
    assert TIERS.index(next(t for t in TIERS if t.name == good.tier_name)) >= \
        TIERS.index(next(t for t in TIERS if t.name == cheap.tier_name))


@given(st.integers(1, 4), st.floats(-1, 1), st.integers(-2, 2), st.booleans())
def test_explaining_never_changes_the_decision(level, preference, bias, budget_hit):
    policy = TenantPolicy(quality_preference=preference, tier_bias=bias, budgets=Budgets(daily_soft=1))
    signal = Signal(level, (0.4, 0.3, 0.2, 0.1), {2: 0.5, 3: 0.3, 4: 0.2}, {3: -0.1})
    usage = UsageSnapshot(5 if budget_hit else 0, 0)
    quiet = decide_route(policy, RouteRequest("auto", signal), TIERS, usage)
    loud = decide_route(policy, RouteRequest("auto", signal, explain=True), TIERS, usage)
    assert quiet.steps == () and loud.steps
    assert (quiet.tier_name, quiet.routed_by, quiet.baseline_tier, quiet.unshifted_tier) == \
        (loud.tier_name, loud.routed_by, loud.baseline_tier, loud.unshifted_tier)
