"""End to end with the real openai SDK, the gateway and two real inference workers (smollm2-135m).

Covers: chat and completions, streamed and not, usage, models list, error cases, and prefix
affinity (sticky with a shared long system prompt, spread under load).
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from tests.gateway.e2e_stack import e2e_stack, tier
from tests.support.kinds import starts_processes

SYSTEM = ("You are the support assistant of the Tiergate project. Answer briefly, politely and only "
          "about the product. ") * 12  # ~1.2 KB: several affinity chunks


@pytest.fixture(scope="module")
@starts_processes
def stack(tmp_path_factory, shared_worker):
    with e2e_stack(tmp_path_factory.mktemp("e2e"),
                   lambda urls: [tier("small", 1, urls), tier("large", 3, urls[1:])], n_workers=1,
                   running_workers=(shared_worker,), aliases={"smart": "auto"}, affinity={"load_margin": 1}) as s:
        yield s


@pytest.fixture(scope="module")
def client(stack):
    with openai.OpenAI(base_url=stack.url + "/v1", api_key="local", max_retries=0, timeout=60) as c:
        yield c


def test_chat_non_streaming(client):
    started = time.perf_counter()
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "Say hello."}], max_tokens=8, temperature=0)
    elapsed_ms = (time.perf_counter() - started) * 1000
    answer = raw.parse()
    assert answer.choices[0].message.role == "assistant" and answer.choices[0].message.content
    assert 0 < answer.usage.completion_tokens <= 8 and answer.usage.prompt_tokens > 0
    assert raw.headers["x-tiergate-tier"] in ("small", "large")
    assert raw.headers["x-tiergate-model"] == "smollm2-135m" and raw.headers["x-request-id"]
    assert 0 < float(raw.headers["x-tiergate-overhead-ms"]) < elapsed_ms  # generation is upstream time


def test_chat_streaming_with_usage(client):
    stream = client.chat.completions.create(
        model="small", messages=[{"role": "user", "content": "Count to five."}], max_tokens=8, stream=True,
        stream_options={"include_usage": True})
    text, usage = "", None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.usage:
            usage = chunk.usage
    assert text and usage is not None and 0 < usage.completion_tokens <= 8


def test_completions_whole_and_streamed(client):
    answer = client.completions.create(model="small", prompt="The capital of France is", max_tokens=6,
                                       temperature=0)
    assert answer.choices[0].text and answer.usage.completion_tokens <= 6
    pieces = [c.choices[0].text for c in client.completions.create(
        model="smart", prompt="One, two, three,", max_tokens=6, stream=True) if c.choices]
    assert "".join(pieces)


def test_models_list(client):
    ids = {m.id for m in client.models.list().data}
    assert {"auto", "small", "large", "smart", "smollm2-135m"} <= ids


def test_error_cases(client):
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    assert err.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="auto", messages=[])
    assert err.value.body["param"] == "messages"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}], temperature=7)


def _ask(client, i: int) -> str:
    raw = client.chat.completions.with_raw_response.create(
        model="small", max_tokens=4, temperature=0,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Question {i}: hi"}])
    raw.parse()
    return raw.headers["x-tiergate-backend"]


def test_prefix_affinity_sticks_then_spreads_under_load(client):
    backends = [_ask(client, i) for i in range(6)]
    assert len(set(backends[1:])) == 1  # after the first answer, the shared prefix pins the worker
    with ThreadPoolExecutor(8) as pool:
        spread = list(pool.map(lambda i: _ask(client, 100 + i), range(8)))
    assert len(set(spread)) == 2  # the affine worker got busy: load went to the other one too
