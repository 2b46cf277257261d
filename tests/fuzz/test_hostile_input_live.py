"""Hostile input against real engines: a gateway process in front of two real SmolLM2 workers
(one per tier), and the workers' own boundary hit directly. Across Unicode oddities, integers
at and past 2^63, NaN and infinities, deep nesting in bodies and schemas, huge enums and
patterns, and parameters at and past their limits: never a 5xx, every refusal an OpenAI error,
and afterwards every worker healthy with its breaker closed.

The flood test: one tenant sends 1,000 requests that the gateway or the workers refuse while
another tenant's ordinary requests to every tier all succeed."""
from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from measure.scale import fuzz_profile
from tests.fuzz.fuzz_stack import CONTEXT, MODEL, NOISY_KEY, NOISY_RPM, TENANT_KEY, TIERS, assert_openai_error, worker_stack
from tests.support import wait_until

FUZZ = settings.get_profile(fuzz_profile())
NAN, INF = float("nan"), float("inf")
HUGE = [2**63 - 1, 2**63, 2**64, 2**80, -2**63, -2**63 - 1, 10**12, 1e308, -1e308, -0.0, NAN, INF, -INF]
ODD_TEXT = ["\ud800", "a\udfff b", "nul\x00byte", "e\u0301\u0301\u0301\u20dd", "\u202eRTL\u202c override",
            "שלום עולם مرحبا", "\ufeff\uffff\U0010ffff", "tab\t\r\n\x7f", "\\u12", "💥" * 40]


def _schema(depth: int, enum: int, pattern: int) -> dict:
    leaf = {"type": "string", "pattern": "a" * pattern} if pattern else {"enum": list(range(enum))} if enum \
        else {"type": "integer"}
    for _ in range(depth):
        leaf = {"type": "object", "properties": {"k": leaf}, "required": ["k"]}
    return leaf


schemas = st.builds(_schema, st.sampled_from([0, 3, 31, 32, 300]), st.sampled_from([0, 5, 1000, 1001]),
                    st.sampled_from([0, 10, 1000, 1001]))
response_formats = st.one_of(
    st.just({"type": "json_object"}), st.just({"type": "text"}),
    schemas.map(lambda s: {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}))
token_ids = st.sampled_from([0, 2, 49151, 49152, 2**31 - 1, 2**31, 2**63, -1])
texts = st.one_of(st.sampled_from(ODD_TEXT), st.text(alphabet=st.characters(codec=None), max_size=30))
nested = st.sampled_from([5, 200, 800]).map(lambda depth: json.loads("[" * depth + "]" * depth))
contents = st.one_of(texts, nested, st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
                                             max_size=2))
OPTIONAL = {
    "seed": st.sampled_from(HUGE) | st.integers(),
    "n": st.sampled_from([1, 2, 16, 17, 2**63, -0.0]),
    "top_k": st.sampled_from([-1, 0, 1, 50, 2**31 - 1, 2**31, 2**64]),
    "temperature": st.sampled_from([0, 0.7, 2, 2.0000001, -0.0, 1e308, NAN, INF]),
    "top_p": st.sampled_from([0, 1, 1.0000001, -0.0, NAN]),
    "presence_penalty": st.sampled_from([-2, 2, 2.01, 1e308, -INF]),
    "repetition_penalty": st.sampled_from([0.01, 10, 10.01, 0, NAN]),
    "logit_bias": st.dictionaries(st.sampled_from(["0", "49151", "49152", "99999999", str(2**64), "-1", "1e3"]),
                                  st.sampled_from([-100, 100, 101, 1e308, NAN]), max_size=3),
    "stop_token_ids": st.lists(token_ids, max_size=3),
    "stop": st.one_of(texts, st.lists(texts, max_size=17)),
    "response_format": response_formats,
    "logprobs": st.booleans(),
    "top_logprobs": st.sampled_from([0, 20, 21]),
    "stream": st.booleans(),
}
# max_tokens is always sent, and small unless it is at or past a limit: accepted work stays cheap
MAX_TOKENS = st.sampled_from([1, 2, 2, 3, CONTEXT, 2**31 - 1, 2**31, 2**63, 10**12, 0, -1, 1e308])
bodies = st.fixed_dictionaries({"messages": st.lists(st.fixed_dictionaries({"role": st.just("user"),
                                                                           "content": contents}),
                                                     min_size=1, max_size=2),
                                "max_tokens": MAX_TOKENS}, optional=OPTIONAL)


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    with worker_stack(tmp_path_factory.mktemp("workers")) as live:
        yield live


def _raw(body: dict) -> bytes:
    """As a client could send it: lone surrogates as \\u escapes, NaN and Infinity as literals."""
    return json.dumps(body).encode()


def check(response) -> None:
    assert response.status < 500, (response.status, response.body[:500])
    if response.status >= 400:
        assert_openai_error(response)
    elif response.headers.get("content-type", "").startswith("text/event-stream"):
        assert response.body.rstrip().endswith(b"data: [DONE]"), response.body[-300:]
    else:
        assert response.json()["choices"], response.body[:300]


@FUZZ
@given(model=st.sampled_from(["auto", *TIERS]), body=bodies)
def test_hostile_bodies_through_the_gateway_never_get_a_5xx(workers, model, body):
    response = workers.request("POST", "/v1/chat/completions", _raw({**body, "model": model}),
                               {"Content-Type": "application/json", "Authorization": f"Bearer {TENANT_KEY}"},
                               timeout=60)
    check(response)


@FUZZ
@given(body=bodies)
def test_hostile_bodies_at_the_worker_never_get_a_5xx(workers, body):
    check(workers.worker_request(0, _raw({**body, "model": MODEL})))


def test_the_reported_requests_get_4xx_naming_the_field(workers):
    auth = {"Content-Type": "application/json", "Authorization": f"Bearer {TENANT_KEY}"}
    hello = [{"role": "user", "content": "hello"}]
    cases = [({"model": "large", "seed": 2**80, "messages": hello}, "seed"),
             ({"model": "auto", "logit_bias": {"99999999": 5}, "messages": hello}, "logit_bias"),
             ({"model": "auto", "max_tokens": 10**12, "messages": hello}, "max_tokens"),
             ({"model": "auto", "messages": hello, "response_format": {"type": "json_schema", "json_schema": {
                 "name": "deep", "schema": _schema(300, 0, 0)}}}, "response_format.json_schema.schema")]
    for body, param in cases:
        for _ in range(4):  # more than the breaker's threshold: nothing may count against a worker
            error = assert_openai_error(workers.request("POST", "/v1/chat/completions", _raw(body), auth), 400)
            assert error["param"] == param, error
    bad_escape = b'{"model":"auto","messages":[{"role":"user","content":"\\u12"}],"max_tokens":4}'
    assert assert_openai_error(workers.request("POST", "/v1/chat/completions", bad_escape, auth), 400)["code"] \
        == "invalid_json"
    surrogate = b'{"model":"auto","messages":[{"role":"user","content":"\\ud800"}],"max_tokens":4}'
    assert assert_openai_error(workers.request("POST", "/v1/chat/completions", surrogate, auth), 400)["param"] \
        == "messages[0].content"
    assert workers.all_closed()


async def _post(session: aiohttp.ClientSession, url: str, key: str, body: dict) -> int:
    async with session.post(url, json=body, headers={"Authorization": f"Bearer {key}"}) as response:
        await response.read()
        return response.status


async def _flood(url: str) -> tuple[list[int], list[int]]:
    # refused at the gateway (seed past 64 bits) and refused by the workers (a prompt the gateway's
    # estimate lets through that tokenizes past the context window)
    wide = "漢字" * (CONTEXT // 2)
    bad = [{"model": "small", "seed": 2**80, "messages": [{"role": "user", "content": "x"}], "max_tokens": 2},
           {"model": "small", "messages": [{"role": "user", "content": wide}], "max_tokens": 2},
           {"model": "large", "messages": [{"role": "user", "content": wide}], "max_tokens": 2}]
    good = [{"model": tier, "messages": [{"role": "user", "content": f"Say hi {i}"}], "max_tokens": 2}
            for i in range(12) for tier in TIERS]
    limit = asyncio.Semaphore(16)

    async def send(key, body):
        async with limit:
            return await _post(session, url, key, body)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        noisy = [asyncio.ensure_future(send(NOISY_KEY, bad[i % len(bad)])) for i in range(1000)]
        polite = [asyncio.ensure_future(send(TENANT_KEY, body)) for body in good]
        return list(await asyncio.gather(*noisy)), list(await asyncio.gather(*polite))


def test_one_tenants_flood_of_refused_requests_costs_another_tenant_nothing(workers):
    noisy, polite = asyncio.run(_flood(f"http://127.0.0.1:{workers.port}/v1/chat/completions"))
    assert polite == [200] * len(polite)
    assert set(noisy) <= {400, 429} and noisy.count(429) >= 1000 - NOISY_RPM, sorted(set(noisy))
    assert noisy.count(400) <= NOISY_RPM  # refused requests spend the rate limit like any other
    assert workers.all_closed()
    wait_until(workers.healthy, timeout_s=10)


AT_THE_LIMIT = [
    {"seed": 2**63 - 1, "n": 3}, {"seed": -2**63}, {"logit_bias": {"49151": 100, "0": -100}},
    {"stop_token_ids": [49151, 0]}, {"top_k": 2**31 - 1}, {"temperature": 2, "top_p": 1e-9},
    {"logprobs": True, "top_logprobs": 20}, {"n": 16}, {"presence_penalty": -2, "repetition_penalty": 10},
    {"response_format": {"type": "json_schema", "json_schema": {"name": "deep", "schema": _schema(31, 0, 0)}}},
    {"response_format": {"type": "json_schema", "json_schema": {"name": "enum", "schema": _schema(0, 1000, 0)}}},
    {"response_format": {"type": "json_schema", "json_schema": {"name": "pat", "schema": _schema(0, 0, 1000)}}},
]


@pytest.mark.parametrize("extra", AT_THE_LIMIT, ids=lambda e: ",".join(e))
def test_parameters_at_their_limits_are_served_by_real_engines(workers, extra):
    # a format needs room for its shortest answer (110 tokens for the 31-deep schema; less fits is a 400)
    body = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 128 if "response_format" in extra
            else 2, **extra}
    auth = {"Content-Type": "application/json", "Authorization": f"Bearer {TENANT_KEY}"}
    for response in (workers.request("POST", "/v1/chat/completions", _raw({**body, "model": "small"}), auth,
                                     timeout=60),
                     workers.worker_request(1, _raw({**body, "model": MODEL}))):
        assert response.status == 200, response.body[:500]
        assert len(response.json()["choices"]) == extra.get("n", 1)


@pytest.mark.parametrize("text", [t for t in ODD_TEXT if "\ud800" not in t and "\udfff" not in t])
def test_odd_but_valid_text_is_served(workers, text):
    body = {"model": "auto", "messages": [{"role": "user", "content": text}], "max_tokens": 2}
    response = workers.request("POST", "/v1/chat/completions", _raw(body),
                               {"Content-Type": "application/json", "Authorization": f"Bearer {TENANT_KEY}"})
    assert response.status == 200, response.body[:500]
