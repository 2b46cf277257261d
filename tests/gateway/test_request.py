"""The frozen GatewayRequest and the one max_tokens rule, built in process (`build_request` with
the real policy and tenants on the shared Redis): what the client asked for or the default, the
tenant's and the tier's caps, the tiers it may reach, and what admission reserves for it."""
from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.core.context import RequestContext
from gateway.api.handlers import build_request
from gateway.core.request import Call, max_tokens_asked, max_tokens_on, parse
from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support.in_process import chat_call, services_for
from tests.support.scripted_transport import ScriptedTransport

KEYS = {"any": "sk-request-any", "capped": "sk-request-capped", "small-only": "sk-request-small-only",
        "plain": "sk-request-plain"}
FORMAT = {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object", "required": ["name"]}}}
DEFAULT_MAX_TOKENS = 64


@pytest.fixture
def services(redis_prefix):
    """small (max_tokens_cap 30) and large (no cap), both structured; four tenants: any, capped
    (max_tokens 40), small-only, and plain (no re-ask on shape)."""
    tenants = {"any": {}, "capped": {"max_tokens": 40}, "small-only": {"allowed_tiers": ["small"]},
               "plain": {"structured_escalation": False}}
    tenants = {name: {"keys": [{"id": "k", "sha256": hash_key(KEYS[name])}], **policy}
               for name, policy in tenants.items()}
    structured = {"capabilities": {"structured_outputs": True, "n": True}}
    tiers = [{**tier("small", 1, ["http://small.test"]), "max_tokens_cap": 30, **structured},
             {**tier("large", 2, ["http://large.test"]), **structured}]
    embed = tier("vectors", 1, ["http://vectors.test"], model="embed-model")
    doc = base_config(tiers, redis_prefix, tenants=tenants, embeddings=[embed],
                      limits={"default_max_tokens": DEFAULT_MAX_TOKENS})
    return services_for(doc, ScriptedTransport(None))


def _request(services, key: str = "any", **body):
    return build_request(services, chat_call(services, KEYS[key], **{"model": "small", **body}))


@pytest.mark.parametrize("asked, expected", [({}, DEFAULT_MAX_TOKENS), ({"max_tokens": 20}, 20),
                                             ({"max_completion_tokens": 10, "max_tokens": 20}, 10)])
def test_max_tokens_asked_is_the_clients_value_chats_own_field_first_or_the_default(services, asked, expected):
    parsed = parse("chat", {"model": "small", "messages": [{"role": "user", "content": "hi"}], **asked})
    assert max_tokens_asked(parsed, services.config) == expected
    assert _request(services, **asked).max_tokens == expected


@pytest.mark.parametrize("policy_cap, tier_cap, expected", [(None, None, 100), (40, None, 40), (None, 30, 30),
                                                            (40, 30, 30), (20, 30, 20), (200, 300, 100)])
def test_max_tokens_on_caps_the_asked_value_by_the_policy_and_the_tier(services, policy_cap, tier_cap, expected):
    route = _request(services).route
    decision, small = replace(route.decision, max_tokens_cap=policy_cap), replace(route.tier, max_tokens_cap=tier_cap)
    assert max_tokens_on(100, decision, small) == expected


def test_reach_is_the_routed_tier_and_its_escalation_path(services):
    assert [t.name for t in _request(services).reach] == ["small", "large"]
    assert [t.name for t in _request(services, model="large").reach] == ["large"]
    assert [t.name for t in _request(services, "small-only").reach] == ["small"]


@pytest.mark.parametrize("key, body, billed", [
    ("any", {"response_format": FORMAT}, 2),                  # a misshapen answer may be asked again above
    ("any", {}, 1),                                           # no schema to check
    ("any", {"response_format": FORMAT, "stream": True}, 1),  # a stream is never asked again
    ("plain", {"response_format": FORMAT}, 1),                # the tenant opted out
    ("small-only", {"response_format": FORMAT}, 1),           # nowhere to climb
])
def test_answers_billed_is_two_only_when_a_shape_re_ask_may_replace_the_answer(services, key, body, billed):
    assert _request(services, key, **body).answers_billed == billed


@pytest.mark.parametrize("key, body, reserved", [
    ("any", {}, DEFAULT_MAX_TOKENS),         # large may serve it, uncapped: the default
    ("any", {"max_tokens": 20}, 20),
    ("capped", {}, 40),                      # the tenant's cap, above small's own
    ("small-only", {}, 30),                  # small's cap is all it may reach
    ("small-only", {"max_tokens": 500}, 30),
    ("any", {"model": "large", "max_tokens": 500}, 500),
])
def test_max_tokens_reserved_is_the_largest_on_any_tier_it_may_reach(services, key, body, reserved):
    assert _request(services, key, **body).max_tokens_reserved == reserved


def test_n_choices_are_reserved_per_choice_and_a_re_askable_request_twice(services):
    request = _request(services, n=3, max_tokens=50, response_format=FORMAT)
    assert (request.n, request.max_tokens_reserved, request.answers_billed) == (3, 50, 2)
    assert _request(services).n == 1


def test_an_embeddings_request_reserves_nothing_to_generate(services):
    tenant = services.sinks.policy.authenticate(f"Bearer {KEYS['any']}")
    call = Call(RequestContext.begin({}), tenant, "embeddings", {"model": "embed-model", "input": ["a", "b"]})
    request = build_request(services, call)
    assert (request.max_tokens, request.max_tokens_reserved, request.n, request.answers_billed) == (0, 0, 1, 1)
    assert [t.name for t in request.reach] == ["vectors"] and not request.stream
