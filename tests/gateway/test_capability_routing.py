"""Capability-aware routing through a real gateway over HTTP, with fake upstreams.

Tiers: `small` and `large` are our own workers (they state their capabilities in /v1/models),
`vllm` is a foreign upstream whose card states nothing, so its capabilities come from the config.
"""
from __future__ import annotations

import openai
import pytest

from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for

TOOLS = [{"type": "function", "function": {"name": "get_weather",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
HI = [{"role": "user", "content": "hi"}]  # level 1 for the prompt-length classifier
DEFAULT_MAX_TOKENS = 77


@pytest.fixture
async def three_tiers(fakes, gateway, redis_prefix, http):
    (small, small_url), (vllm, vllm_url), (large, large_url) = await fakes(3)
    small.capabilities = {"tools": False, "structured_outputs": False, "logprobs": False, "n": False,
                          "embeddings": False, "max_context_tokens": 512}
    large.capabilities = {"tools": True, "structured_outputs": True, "logprobs": False, "n": False,
                          "embeddings": False, "max_context_tokens": 16384}
    vllm.capabilities = None  # a foreign upstream: its card states nothing
    foreign = {**tier("vllm", 2, [vllm_url]), "capabilities": {"structured_outputs": True, "max_context_tokens": 4096}}
    doc = base_config([tier("small", 1, [small_url]), foreign, tier("large", 3, [large_url])], redis_prefix,
                      limits={"default_max_tokens": DEFAULT_MAX_TOKENS})
    gw = await gateway(doc)
    await _until_learned(gw, http)
    client = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="unused", max_retries=0)
    yield gw, client, small, vllm, large
    await client.close()


async def _until_learned(gw, http) -> None:
    """Cards are read by the health loop: wait until both own workers' are in."""
    await wait_for(lambda: gw.state.services.router.capabilities["small"].max_context_tokens == 512
                   and gw.state.services.router.capabilities["large"].tools, timeout_s=10.0)


async def _route(http, gw, body) -> dict:
    async with http.post(gw.url + "/v1/route", json=body) as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def test_tools_skip_the_tiers_that_cannot_call_them(three_tiers, http):
    gw, client, small, vllm, large = three_tiers
    answer = await client.chat.completions.with_raw_response.create(model="auto", messages=HI, tools=TOOLS)
    assert answer.headers["x-tiergate-tier"] == "large"
    assert large.seen[-1]["body"]["tools"] == TOOLS and small.served == vllm.served == 0
    route = await _route(http, gw, {"model": "auto", "messages": HI, "tools": TOOLS})
    caps = next(s for s in route["steps"] if s["step"] == "capabilities")
    assert caps["needs"] == ["tools"] and caps["excluded"] == {"small": ["tools"], "vllm": ["tools"]}
    assert route["routed_by"] == "classifier" and route["capabilities"]["tools"] is True


async def test_structured_output_goes_to_the_foreign_tier_whose_config_says_it_can(three_tiers):
    gw, client, small, vllm, large = three_tiers
    fmt = {"type": "json_object"}
    vllm.reply = '{"ok":true}'  # a whole, valid answer: nothing to escalate
    answer = await client.chat.completions.with_raw_response.create(model="auto", messages=HI, response_format=fmt)
    assert answer.headers["x-tiergate-tier"] == "vllm" and vllm.seen[-1]["body"]["response_format"] == fmt


async def test_a_named_tier_without_the_capability_is_a_400_naming_the_parameter(three_tiers):
    gw, client, small, vllm, large = three_tiers
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(model="vllm", messages=HI, tools=TOOLS)
    assert err.value.body["param"] == "tools" and err.value.body["code"] == "unsupported_parameter"
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(model="small", messages=HI, max_tokens=2000)
    assert err.value.body["param"] == "messages" and err.value.body["code"] == "context_length_exceeded"
    assert small.served == vllm.served == large.served == 0


async def test_a_request_too_long_for_the_cheap_tier_goes_to_one_whose_window_holds_it(three_tiers, http):
    gw, client, small, vllm, large = three_tiers
    fits = await client.chat.completions.with_raw_response.create(model="auto", messages=HI, max_tokens=400)
    assert fits.headers["x-tiergate-tier"] == "small"
    bigger = await client.chat.completions.with_raw_response.create(model="auto", messages=HI, max_tokens=2000)
    assert bigger.headers["x-tiergate-tier"] == "vllm"
    huge = await client.chat.completions.with_raw_response.create(model="auto", messages=HI, max_tokens=8000)
    assert huge.headers["x-tiergate-tier"] == "large"
    route = await _route(http, gw, {"model": "auto", "messages": HI, "max_tokens": 2000})
    caps = next(s for s in route["steps"] if s["step"] == "capabilities")
    assert caps["excluded"] == {"small": ["max_context_tokens"]} and 2000 < caps["context_tokens"] < 2010


async def test_default_max_tokens_reaches_the_upstream(three_tiers):
    gw, client, small, vllm, large = three_tiers
    await client.chat.completions.create(model="small", messages=HI)
    assert small.seen[-1]["body"]["max_tokens"] == DEFAULT_MAX_TOKENS
    await client.chat.completions.create(model="small", messages=HI, max_tokens=3)
    assert small.seen[-1]["body"]["max_tokens"] == 3
    stream = await client.completions.create(model="small", prompt="hi", stream=True)
    async for _ in stream:
        pass
    assert small.seen[-1]["body"]["max_tokens"] == DEFAULT_MAX_TOKENS


async def test_no_capable_tier_at_all_is_a_400(fakes, gateway, redis_prefix):
    (only, url), = await fakes(1)
    only.capabilities = None  # a card that states nothing
    gw = await gateway(base_config([tier("only", 1, [url])], redis_prefix))
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="unused", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as err:
            await client.chat.completions.create(model="auto", messages=HI,
                                                 response_format={"type": "json_object"})
    assert err.value.body["param"] == "response_format" and "no tier" in err.value.body["message"]


@pytest.mark.parametrize("escalate", [True, False])
async def test_token_ids_must_fit_every_tier_the_request_may_reach(fakes, gateway, redis_prefix, escalate):
    (small, small_url), (large, large_url) = await fakes(2)
    small.capabilities, large.capabilities = {"vocab_size": 1000}, {"vocab_size": 500}
    gw = await gateway(base_config([tier("small", 1, [small_url]), tier("large", 2, [large_url])], redis_prefix,
                                   failover={"escalate": escalate}))
    await wait_for(lambda: gw.state.services.router.capabilities["large"].vocab_size == 500, timeout_s=10.0)
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="unused", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as err:  # past the chosen tier's own vocabulary
            await client.chat.completions.create(model="small", messages=HI, logit_bias={"1000": 1})
        assert err.value.body["param"] == "logit_bias" and "tier 'small'" in err.value.body["message"]
        fits_small_only = dict(model="small", messages=HI, stop=None, extra_body={"stop_token_ids": [700]})
        if escalate:  # a failover could take it to `large`, which has no token 700
            with pytest.raises(openai.BadRequestError) as err:
                await client.chat.completions.create(**fits_small_only)
            assert err.value.body["param"] == "stop_token_ids" and "tier 'large'" in err.value.body["message"]
        else:
            assert (await client.chat.completions.create(**fits_small_only)).choices[0].message.content
    assert small.served == (0 if escalate else 1) and large.served == 0
