"""The OpenAPI description is valid OpenAPI 3.1, covers every route, and matches real answers."""
from __future__ import annotations

import jsonschema
import pytest
from openapi_spec_validator import validate

from gateway.api.openapi import SPEC
from tests.gateway.gw_helpers import base_config, tier
from tests.support.scripted_transport import ScriptedTransport, worker


def _check(instance, schema_name: str) -> None:
    """Validate against one component schema; refs resolve inside the spec's components."""
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": SPEC["components"]}
    jsonschema.Draft202012Validator(schema).validate(instance)


def test_spec_is_valid_openapi_3():
    validate(SPEC)  # raises OpenAPIValidationError with the failing path
    assert SPEC["openapi"].startswith("3.")
    for path, item in SPEC["paths"].items():
        for method, op in item.items():
            assert "200" in op["responses"], (method, path)
            for status, answer in op["responses"].items():
                if status.startswith(("4", "5")):
                    schema = answer["content"]["application/json"]["schema"]
                    shape = "AnthropicError" if path == "/v1/messages" else "Error"  # Anthropic clients parse theirs
                    assert schema == {"$ref": f"#/components/schemas/{shape}"}, (method, path, status)


def test_schema_rejects_what_the_gateway_rejects():
    with pytest.raises(jsonschema.ValidationError):
        _check({"model": "auto", "messages": []}, "ChatCompletionRequest")
    with pytest.raises(jsonschema.ValidationError):
        _check({"error": {"message": "x"}}, "Error")
    _check({"model": "auto", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}, "ChatCompletionRequest")


@pytest.fixture
async def gw(gateway, redis_prefix):
    url = "http://worker.test"  # played by the scripted transport: the answers are the gateway's, not a socket's
    return await gateway(base_config([tier("small", 1, [url]), tier("large", 2, [url])], redis_prefix),
                         transport=ScriptedTransport(worker))


async def test_every_route_is_described_and_served(gw, http):
    routes = {(r.method.lower(), r.resource.canonical) for r in gw.runner.app.router.routes()
              if r.method != "HEAD"}
    described = {(m, p) for p, item in SPEC["paths"].items() for m in item}
    assert routes == described
    async with http.get(gw.url + "/openapi.json") as response:
        assert response.status == 200
        assert await response.json() == SPEC


async def test_real_answers_match_their_schemas(gw, http):
    async with http.get(gw.url + "/health") as r:
        _check(await r.json(), "Health")
    async with http.get(gw.url + "/v1/models") as r:
        _check(await r.json(), "ModelList")
    chat = {"model": "small", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
    async with http.post(gw.url + "/v1/chat/completions", json=chat) as r:
        assert r.status == 200
        _check(await r.json(), "ChatCompletion")
    async with http.post(gw.url + "/v1/completions", json={"model": "small", "prompt": "hi", "max_tokens": 3}) as r:
        assert r.status == 200
        _check(await r.json(), "Completion")
    async with http.post(gw.url + "/v1/route", json={"model": "auto", "prompt": "hi"}) as r:
        _check(await r.json(), "RouteDecision")
    async with http.get(gw.url + "/v1/quality") as r:
        _check(await r.json(), "Quality")
    async with http.post(gw.url + "/v1/chat/completions", json={"model": "small"}) as r:
        assert r.status == 400
        _check(await r.json(), "Error")
