"""Bad input gets a 4xx with an OpenAI error body and the tiergate headers; never a 500."""
from __future__ import annotations

import pytest

from tests.gateway.gw_helpers import base_config, tier


@pytest.fixture
async def gw(fakes, gateway, redis_prefix):
    (fake, url), = await fakes(1)
    doc = base_config([tier("small", 1, [url])], redis_prefix, limits={"max_body_bytes": 4096})
    return await gateway(doc)


async def _error(http, method, url, status, **kwargs) -> dict:
    async with http.request(method, url, **kwargs) as response:
        assert response.status == status, await response.text()
        assert response.content_type == "application/json"
        assert response.headers["x-request-id"] and "x-tiergate-overhead-ms" in response.headers
        body = await response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.mark.parametrize("payload, param", [
    ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
    ({"model": "auto"}, "messages"),
    ({"model": "auto", "messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
    ({"model": "auto", "messages": [{"role": "user", "content": "hi"}], "temperature": 9}, "temperature"),
    ({"model": "auto", "messages": [{"role": "user", "content": "hi"}], "max_tokens": -1}, "max_tokens"),
])
async def test_invalid_fields_name_the_field(gw, http, payload, param):
    error = await _error(http, "POST", gw.url + "/v1/chat/completions", 400, json=payload)
    assert error["param"] == param and error["type"] == "invalid_request_error"


async def test_invalid_json(gw, http):
    error = await _error(http, "POST", gw.url + "/v1/chat/completions", 400, data=b"{not json",
                         headers={"Content-Type": "application/json"})
    assert error["code"] == "invalid_json"
    error = await _error(http, "POST", gw.url + "/v1/completions", 400, json=[1, 2])
    assert error["code"] == "invalid_json"


async def test_body_over_configured_size(gw, http):
    big = {"model": "auto", "messages": [{"role": "user", "content": "x" * 5000}]}
    error = await _error(http, "POST", gw.url + "/v1/chat/completions", 413, json=big)
    assert error["code"] == "request_too_large"


async def test_unknown_model_is_404_model_not_found(gw, http):
    error = await _error(http, "POST", gw.url + "/v1/chat/completions", 404,
                         json={"model": "gpt-17", "messages": [{"role": "user", "content": "hi"}]})
    assert error["code"] == "model_not_found" and error["param"] == "model"
    error = await _error(http, "POST", gw.url + "/v1/route", 404, json={"model": "gpt-17", "prompt": "hi"})
    assert error["code"] == "model_not_found"


async def test_unknown_path_and_wrong_method(gw, http):
    await _error(http, "GET", gw.url + "/v1/nothing-here", 404)
    await _error(http, "GET", gw.url + "/v1/chat/completions", 405)


async def test_client_request_id_is_replaced_when_unsafe(gw, http):
    async with http.get(gw.url + "/v1/models", headers={"x-request-id": "bad id\twith spaces"}) as response:
        assert response.status == 200
        assert response.headers["x-request-id"].startswith("req-")
