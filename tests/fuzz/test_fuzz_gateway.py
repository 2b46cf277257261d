"""Hostile input against a real gateway process: never a 5xx, always an OpenAI error body for
rejections, and the process stays healthy. Hypothesis-driven, bounded (~200 examples)."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from measure.scale import fuzz_profile
from tests.fuzz.fuzz_stack import BODY_LIMIT, TENANT_KEY, assert_openai_error

PATHS = ["/v1/chat/completions", "/v1/completions", "/v1/route"]
FUZZ = settings.get_profile(fuzz_profile())  # 40 examples in `make test`; see conftest.py
SMALLER = FUZZ.max_examples * 3 // 4

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**20, max_value=10**20),
                    st.floats(allow_nan=False), st.text(max_size=30))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=30)
absurd = st.one_of(scalars, st.sampled_from([10**9, 1000, -1, -0.5, 1e308, "", [], {}, [1, "x"], {"a": None}]))
FIELDS = ["model", "messages", "prompt", "max_tokens", "max_completion_tokens", "n", "temperature", "top_p",
          "top_k", "stop", "stream", "stream_options", "seed", "logprobs", "best_of", "presence_penalty",
          "frequency_penalty", "stop_token_ids", "ignore_eos"]
message = st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", "wizard", 3]),
                                 "content": st.one_of(st.text(max_size=40), absurd)})
request_bodies = st.fixed_dictionaries(
    {"model": st.sampled_from(["auto", "small", "large", "nope", 7, None, ""])},
    optional={**{f: absurd for f in FIELDS[1:]}, "messages": st.lists(st.one_of(message, absurd), max_size=3),
              "prompt": st.one_of(st.text(max_size=40), st.lists(st.integers(), max_size=5), absurd)})


def check(response) -> None:
    """Never 5xx; a rejection is an OpenAI error; an acceptance is an answer or an SSE stream."""
    assert response.status < 500, (response.status, response.body[:500])
    if response.status >= 400:
        assert_openai_error(response)
    else:
        assert response.status == 200
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            assert response.body.rstrip().endswith(b"data: [DONE]"), response.body[-200:]
        else:
            assert isinstance(response.json(), dict)


@FUZZ
@given(path=st.sampled_from(PATHS), body=request_bodies)
def test_absurd_and_mistyped_parameters(stack, path, body):
    check(stack.post_json(path, body))


@FUZZ
@given(path=st.sampled_from(PATHS), body=json_values)
def test_arbitrary_json_documents(stack, path, body):
    response = stack.post_json(path, body)
    check(response)
    if not isinstance(body, dict):
        assert assert_openai_error(response, 400)["code"] == "invalid_json"


@settings(FUZZ, max_examples=SMALLER)
@given(path=st.sampled_from(PATHS), raw=st.binary(min_size=1, max_size=300))
def test_raw_bytes_and_invalid_utf8(stack, path, raw):
    try:
        json.loads(raw)
        is_json = True
    except (ValueError, RecursionError):
        is_json = False
    response = stack.request("POST", path, raw, {"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {TENANT_KEY}"})
    check(response)
    if not is_json:
        assert assert_openai_error(response, 400)["code"] == "invalid_json"


token = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=20)
header_value = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=200)


@settings(FUZZ, max_examples=SMALLER)
@given(headers=st.dictionaries(token.filter(lambda h: h not in {"content-length", "transfer-encoding", "host"}),
                               header_value, max_size=8),
       authorization=st.one_of(st.none(), header_value, st.just(f"Bearer {TENANT_KEY}")))
def test_random_headers(stack, headers, authorization):
    headers = dict(headers, **({"Authorization": authorization} if authorization is not None else {}))
    body = json.dumps({"model": "small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    response = stack.request("POST", "/v1/chat/completions", body.encode(), headers)
    check(response)
    if authorization != f"Bearer {TENANT_KEY}" and "authorization" not in {h.lower() for h in headers}:
        assert assert_openai_error(response, 401)["type"] == "authentication_error"


def test_deeply_nested_json_is_400(stack):
    for raw in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 40_000 + b"1" + b"}" * 40_000):
        assert len(raw) < BODY_LIMIT
        response = stack.request("POST", "/v1/chat/completions", raw, {"Authorization": f"Bearer {TENANT_KEY}"})
        assert assert_openai_error(response, 400)["code"] == "invalid_json"
    nested = {"model": "small", "messages": [{"role": "user", "content": json.loads("[" * 500 + "]" * 500)}]}
    assert_openai_error(stack.post_json("/v1/chat/completions", nested), 400)


def test_ten_megabyte_prompt_is_413(stack):
    huge = {"model": "small", "prompt": "x" * (10 << 20)}
    assert assert_openai_error(stack.post_json("/v1/completions", huge), 413)["code"] == "request_too_large"
    # the same body without a Content-Length (chunked upload) is refused just the same
    chunks = iter([json.dumps(huge).encode()[i:i + (1 << 20)] for i in range(0, (10 << 20) + 100, 1 << 20)])
    # (an iterable body and no Content-Length: http.client sends it chunked)
    response = stack.request("POST", "/v1/completions", chunks, {"Authorization": f"Bearer {TENANT_KEY}"})
    assert_openai_error(response, 413)


def test_named_absurd_values_are_rejected(stack):
    base = {"model": "small", "messages": [{"role": "user", "content": "hi"}]}
    for field, value in [("n", 1000), ("temperature", -1), ("top_p", 7), ("max_tokens", -5),
                         ("max_tokens", "many"), ("stream", "yes"), ("messages", "hi"), ("stop", [1, 2])]:
        error = assert_openai_error(stack.post_json("/v1/chat/completions", dict(base, **{field: value})), 400)
        assert error["param"] is not None and error["param"].startswith(field), (field, error)


def test_process_survives_and_stays_healthy(stack):
    # runs last in this module (pytest keeps file order): everything above hit the same process
    assert stack.healthy()
    assert "Traceback" not in stack.logs()
    ok = stack.post_json("/v1/chat/completions", {"model": "small", "messages": [{"role": "user", "content": "hi"}],
                                                  "max_tokens": 3})
    assert ok.status == 200 and ok.json()["choices"]
