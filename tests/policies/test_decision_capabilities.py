"""Capability filter in the decision: auto finds a capable tier, a named one refuses by parameter."""
from __future__ import annotations

import pytest

from policies.config import TenantPolicy
from policies.decision import decide_route
from policies.decision_types import RouteRequest, RoutedBy, Signal, StepKind
from tests.policies.policy_helpers import TIERS
from wire.capabilities import Capabilities, needs_of
from wire.errors import OpenAIError

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
CAPS = {"small": Capabilities(max_context_tokens=2048),
        "medium": Capabilities(tools=True, max_context_tokens=2048),
        "large": Capabilities(tools=True, structured_outputs=True, max_context_tokens=32768),
        "expert": Capabilities(tools=True, structured_outputs=True)}


def run(body, model="auto", level=1, prompt_tokens=10, policy=TenantPolicy()):
    request = RouteRequest(model, Signal(level), needs_of({"messages": [], **body}, prompt_tokens, 256), CAPS, True)
    return decide_route(policy, request, TIERS)


def refusal(body, **kwargs) -> OpenAIError:
    with pytest.raises(OpenAIError) as err:
        run(body, **kwargs)
    return err.value


def test_auto_takes_the_cheapest_capable_tier_at_or_above_the_level():
    d = run({"tools": TOOLS})
    assert (d.tier_name, d.routed_by, d.baseline_tier) == ("medium", RoutedBy.CLASSIFIER, "medium")
    caps = next(s.detail for s in d.steps if s.kind is StepKind.CAPABILITIES)
    assert caps["needs"] == ["tools"] and caps["excluded"] == {"small": ["tools"]}
    assert caps["capable"] == ["medium", "large", "expert"]
    assert run({"response_format": {"type": "json_schema"}}).tier_name == "large"
    assert run({"tools": TOOLS}, level=4).tier_name == "expert"
    assert run({}).tier_name == "small"


def test_a_prompt_too_long_for_the_picked_tier_goes_where_it_fits():
    assert run({}, prompt_tokens=1500).tier_name == "small"          # 1500 + 256 fits 2048
    d = run({}, prompt_tokens=4000)
    assert d.tier_name == "large"
    caps = next(s.detail for s in d.steps if s.kind is StepKind.CAPABILITIES)
    assert caps["context_tokens"] == 4256 and caps["excluded"]["small"] == ["max_context_tokens"]
    assert run({}, prompt_tokens=100_000).tier_name == "expert"      # window not stated: not checked


def test_a_named_tier_without_the_capability_is_a_400_naming_the_parameter():
    err = refusal({"tools": TOOLS}, model="small")
    assert (err.status, err.param, err.code) == (400, "tools", "unsupported_parameter")
    err = refusal({"response_format": {"type": "json_object"}}, model="medium")
    assert (err.status, err.param) == (400, "response_format")
    err = refusal({}, model="small", prompt_tokens=4000)
    assert (err.status, err.param, err.code) == (400, "messages", "context_length_exceeded")


def test_no_capable_tier_at_all_is_a_400_naming_the_parameter():
    err = refusal({"logprobs": True, "top_logprobs": 3})
    assert (err.status, err.param, err.code) == (400, "top_logprobs", "unsupported_parameter")
    err = refusal({"n": 2, "tools": TOOLS})
    assert err.param == "n"  # the one no tier has, not the one the cheapest tier lacks first


def test_capable_tiers_the_tenant_may_not_use_do_not_count():
    err = refusal({"tools": TOOLS}, policy=TenantPolicy(allowed_tiers=("small",)))
    assert (err.status, err.param) == (400, "tools")
    d = run({"tools": TOOLS}, policy=TenantPolicy(allowed_tiers=("small", "large")))
    assert (d.tier_name, d.routed_by) == ("large", RoutedBy.POLICY)  # the classifier's capable pick was medium
