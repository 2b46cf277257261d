"""plan_route(): from a parsed request to its tier and the tiers it may climb to, in process
(the Router assembled for a config, the prompt-length classifier, the tenant's policy)."""
from __future__ import annotations

import pytest

from gateway.config import AUTO
from gateway.core.request import max_tokens_asked, parse
from gateway.core.routing import plan_route
from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support.in_process import chat_call, services_for
from tests.support.scripted_transport import ScriptedTransport
from wire.errors import OpenAIError

KEYS = {"all": "sk-routing-all", "low": "sk-routing-low"}
EMBED = tier("vectors", 1, ["http://vectors.test"], model="embed-model")


@pytest.fixture
def services(redis_prefix):
    tenants = {"all": {"keys": [{"id": "k", "sha256": hash_key(KEYS["all"])}]},
               "low": {"keys": [{"id": "k", "sha256": hash_key(KEYS["low"])}], "allowed_tiers": ["small", "medium"]}}
    tiers = [tier(name, level, [f"http://{name}.test"]) for level, name in enumerate(("small", "medium", "large"), 1)]
    return services_for(base_config(tiers, redis_prefix, tenants=tenants, embeddings=[EMBED]), ScriptedTransport(None))


def _route(services, key: str, **body):
    call = chat_call(services, key, **body)
    parsed = parse("chat", call.body)
    return plan_route(services.router, services.config, call.tenant, parsed, call.body,
                      max_tokens_asked(parsed, services.config))


def _said(chars: int) -> list[dict]:
    return [{"role": "user", "content": "y" * chars}]


@pytest.mark.parametrize("chars, expected", [(10, "small"), (500, "medium"), (2000, "large")])
def test_auto_follows_the_classifiers_level(services, chars, expected):
    route = _route(services, KEYS["all"], model=AUTO, messages=_said(chars))
    assert route.tier.name == expected and route.classification.tier == ("small", "medium", "large").index(
        expected) + 1
    assert "y" * chars in route.prompt_text and route.estimated_prompt_tokens == len(route.prompt_text) // 4 + 1


def test_the_escalation_path_holds_only_the_tiers_the_tenant_may_use(services):
    assert [t.name for t in _route(services, KEYS["all"], model="small").escalation_path] == ["medium", "large"]
    route = _route(services, KEYS["low"], model="small")
    assert [t.name for t in route.escalation_path] == ["medium"]
    assert route.next_up(route.escalation_path[0]) is None


def test_a_named_tier_is_not_classified(services):
    route = _route(services, KEYS["all"], model="medium", messages=_said(3000))
    assert route.tier.name == "medium" and route.classification is None


@pytest.mark.parametrize("model, status, code", [("embed-model", 400, "wrong_endpoint"),
                                                  ("no-such-model", 404, "model_not_found")])
def test_a_model_this_endpoint_cannot_serve_is_refused_by_name(services, model, status, code):
    with pytest.raises(OpenAIError) as refused:
        _route(services, KEYS["all"], model=model)
    assert (refused.value.status, refused.value.code, refused.value.param) == (status, code, "model")
