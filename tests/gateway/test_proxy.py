"""Proxying against fake upstreams with the real openai SDK: answers, streams, usage, headers."""
from __future__ import annotations

import time

import openai
import pytest

from tests.gateway.gw_helpers import base_config, tier


@pytest.fixture
async def two_tier(fakes, gateway, redis_prefix):
    (small, small_url), (large, large_url) = await fakes(2, chunks=5)
    doc = base_config([tier("small", 1, [small_url]), tier("large", 3, [large_url])], redis_prefix,
                      aliases={"smart": "auto", "cheap": "small"})
    gw = await gateway(doc)
    client = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="unused", max_retries=0)
    yield gw, client, small, large
    await client.close()


async def test_chat_non_streaming_returns_upstream_answer_and_headers(two_tier):
    gw, client, small, large = two_tier
    started = time.perf_counter()
    raw = await client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "hi"}], extra_headers={"x-request-id": "abc-123"})
    elapsed_ms = (time.perf_counter() - started) * 1000
    answer = raw.parse()
    assert answer.choices[0].message.content == "w0 w1 w2 w3 w4"
    assert answer.usage.completion_tokens == 5
    assert raw.headers["x-tiergate-tier"] == "small"  # short prompt: level 1
    assert raw.headers["x-tiergate-model"] == "model-small"
    assert raw.headers["x-tiergate-backend"] == "small-1"  # a name: worker addresses are for the admin key only
    server_id = raw.headers["x-request-id"]   # the gateway's own id; the client's is only echoed
    assert server_id.startswith("req-") and raw.headers["x-client-request-id"] == "abc-123"
    assert 0 < float(raw.headers["x-tiergate-overhead-ms"]) < elapsed_ms  # the gateway's share of what we waited
    assert small.seen[-1]["body"]["model"] == "model-small"  # upstream sees the tier's model
    assert small.seen[-1]["headers"]["x-request-id"] == server_id


async def test_classifier_routes_long_prompt_to_higher_tier(two_tier):
    gw, client, small, large = two_tier
    raw = await client.chat.completions.with_raw_response.create(
        model="smart", messages=[{"role": "user", "content": "x" * 1500}])
    assert raw.headers["x-tiergate-tier"] == "large"  # level 3 by the length rule
    assert large.served == 1 and small.served == 0


async def test_explicit_tier_model_and_alias_are_honoured(two_tier):
    gw, client, small, large = two_tier
    for model, expected in [("large", "large"), ("model-large", "large"), ("cheap", "small")]:
        raw = await client.chat.completions.with_raw_response.create(
            model=model, messages=[{"role": "user", "content": "x" * 1500}])
        assert raw.headers["x-tiergate-tier"] == expected, model


async def test_chat_stream_relays_chunks_and_usage_when_asked(two_tier):
    gw, client, small, large = two_tier
    stream = await client.chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True})
    texts, usage = [], None
    async for chunk in stream:
        if chunk.choices:
            texts.append(chunk.choices[0].delta.content)
        if chunk.usage:
            usage = chunk.usage
    assert "".join(texts) == "w0 w1 w2 w3 w4 "
    assert usage is not None and usage.completion_tokens == 5


async def test_stream_without_include_usage_hides_the_usage_chunk(two_tier):
    gw, client, small, large = two_tier
    stream = await client.chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "hi"}], stream=True)
    chunks = [chunk async for chunk in stream]
    assert all(chunk.choices for chunk in chunks) and len(chunks) == 5
    # ...but the gateway asked the upstream for it, so its accounting is exact
    assert small.seen[-1]["body"]["stream_options"] == {"include_usage": True}


async def test_completions_whole_and_streamed(two_tier):
    gw, client, small, large = two_tier
    answer = await client.completions.create(model="small", prompt="Once upon", max_tokens=3)
    assert answer.choices[0].text == "w0 w1 w2" and answer.usage.completion_tokens == 3
    stream = await client.completions.create(model="small", prompt="Once upon", max_tokens=2, stream=True)
    assert "".join([c.choices[0].text async for c in stream]) == "w0 w1 "


async def test_models_lists_auto_tiers_models_and_aliases(two_tier):
    gw, client, small, large = two_tier
    ids = {m.id for m in (await client.models.list()).data}
    assert {"auto", "small", "large", "model-small", "model-large", "smart", "cheap"} <= ids


async def test_route_dry_run_reports_decision_without_generating(two_tier, http):
    gw, client, small, large = two_tier
    async with http.post(gw.url + "/v1/route", json={"model": "auto", "messages": [
            {"role": "user", "content": "y" * 1500}]}) as response:
        assert response.status == 200
        decision = await response.json()
        assert response.headers["x-tiergate-tier"] == "large"
    assert decision["tier"] == "large" and decision["model"] == "model-large"
    assert decision["classifier"]["name"] == "prompt-length-rule" and decision["classifier"]["tier"] == 3
    assert decision["routed_by"] == "classifier" and decision["backend"] == gw.state.services.upstreams.pools.by_tier["large"].backends[0].url
    assert [s["step"] for s in decision["steps"]] == ["level", "capabilities", "chosen"]
    assert decision["steps"][0] == {"step": "level", "level": 3, "source": "classifier level (no scores)"}
    assert small.served == 0 and large.served == 0


async def test_upstream_4xx_is_passed_through_without_retry(fakes, gateway, redis_prefix):
    (fake, url), = await fakes(1)
    gw = await gateway(base_config([tier("t", 1, [url], model="reject-me")], redis_prefix))
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0) as client:
        with pytest.raises(openai.NotFoundError) as err:
            await client.chat.completions.create(model="t", messages=[{"role": "user", "content": "hi"}])
    assert err.value.body["code"] == "model_not_found" and len(fake.seen) == 1
