"""Schema patterns run in RE2: a structured answer is checked against its schema's `pattern` in
time linear in its length, so a pattern that backtracks exponentially in Python's `re` holds up
no other request; and a pattern RE2 cannot compile (backreferences, lookaround) is refused at
request time with a 400 that names it, by the gateway and by the worker's parser alike."""
from __future__ import annotations

import asyncio
import json

import pytest

from wire.errors import OpenAIError
from wire.requests import parse_chat
from wire.schema_regex import RE2Validator
from tests.gateway.gw_helpers import base_config, tier

EVIL = "(a+)+b"  # Python's re backtracks 2^n steps on n a's without a b
ADVERSARIAL = "a" * 64  # 2^64 steps for re: the request completes only if the check is linear
HI = [{"role": "user", "content": "hi"}]


def _format(pattern: str) -> dict:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    return {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}


@pytest.fixture
async def gw(fakes, gateway, redis_prefix):
    ((fake, url),) = await fakes(1)
    able = {"capabilities": {"structured_outputs": True, "tools": True}}
    gw = await gateway(base_config([{**tier("small", 1, [url]), **able}], redis_prefix))
    fake.replies = {"adversarial": json.dumps({"s": ADVERSARIAL})}
    return gw


async def _post(http, gw, body: dict) -> tuple[int, dict]:
    async with http.post(gw.url + "/v1/chat/completions", json=body) as response:
        return response.status, await response.json()


async def test_a_pathological_pattern_holds_up_no_other_request(gw, http):
    plain = {"model": "small", "messages": HI, "max_tokens": 4}
    evil = {"model": "small", "messages": [{"role": "user", "content": "adversarial"}],
            "response_format": _format(EVIL)}
    checked = asyncio.ensure_future(_post(http, gw, evil))
    during = []
    while not checked.done():  # a plain request is always in flight while the evil one is answered
        status, _ = await _post(http, gw, plain)
        assert status == 200
        during.append(status)
    status, answer = checked.result()
    assert status == 200 and json.loads(answer["choices"][0]["message"]["content"]) == {"s": ADVERSARIAL}
    assert during  # other requests were answered while the pattern was checked


@pytest.mark.parametrize("pattern", [r"^(a)\1$", "(?=x)y", "(?<!a)b"])
async def test_a_pattern_re2_cannot_run_is_refused_naming_it(gw, http, pattern):
    status, body = await _post(http, gw, {"model": "small", "messages": HI, "response_format": _format(pattern)})
    error = body["error"]
    assert status == 400 and error["code"] == "unsupported_pattern", error
    assert error["param"] == "response_format.json_schema.schema" and repr(pattern) in error["message"]
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "patternProperties": {pattern: {"type": "string"}}}}}
    status, body = await _post(http, gw, {"model": "small", "messages": HI, "tools": [tool]})
    assert status == 400 and body["error"]["param"] == "tools[0].function.parameters", body
    assert repr(pattern) in body["error"]["message"]
    with pytest.raises(OpenAIError) as refused:  # the worker parses requests with the same wire/ code
        parse_chat({"model": "m", "messages": HI, "response_format": _format(pattern)})
    assert refused.value.status == 400 and repr(pattern) in refused.value.message


def test_re2_checks_keep_json_schema_meaning():
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]{2}-\\d+$"}},
              "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
    validator = RE2Validator(schema)
    assert validator.is_valid({"id": "ab-12", "x-n": 3})
    assert not validator.is_valid({"id": "AB-12"})
    assert not validator.is_valid({"x-n": "three"})
    assert not validator.is_valid({"other": 1})
