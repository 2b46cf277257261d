"""An answer without usage (a foreign upstream that never reports it, whole or streamed) is
billed all the same: counted with the tier's tokenizer when the config names one, else the
gateway's estimate, and the usage log says which (`usage_source`); a reported count is `worker`."""
from __future__ import annotations

import glob

import openai
import pytest
from transformers import AutoTokenizer

from backends.engine.model.models import model_dir
from policies.keys import hash_key
from policies.usage_log import read_records
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for

KEY = "sk-usage-source-key"
HI = [{"role": "user", "content": "say something"}]


@pytest.fixture
async def two(fakes, gateway, redis_prefix, tmp_path):
    """`counted` has the SmolLM2 tokenizer configured, `plain` none; both upstreams are fakes."""
    (counted, c_url), (plain, p_url) = await fakes(2)
    folder = str(model_dir("smollm2-135m"))
    tiers = [{**tier("small", 1, [p_url]), "name": "plain"}, {**tier("large", 2, [c_url]), "name": "counted",
                                                               "tokenizer": folder}]
    doc = base_config(tiers, redis_prefix, tenants={"acme": {"keys": [{"id": "k", "sha256": hash_key(KEY)}]}},
                      policy={"usage_log": {"dir": str(tmp_path / "usage"), "fsync": "always"}})
    gw = await gateway(doc)
    return gw, counted, plain, folder, lambda: read_records(sorted(glob.glob(str(tmp_path / "usage" / "*"))))


async def _ask(gw, model: str, stream: bool) -> str:
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=KEY, max_retries=0) as client:
        if not stream:
            return (await client.chat.completions.create(model=model, messages=HI)).choices[0].message.content
        chunks = await client.chat.completions.create(model=model, messages=HI, stream=True)
        return "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])


async def _unreported(two, tier: str, stream: bool):
    """The record and the text of one answer from `tier`, whose upstream reports no usage."""
    gw, counted, plain, _, records = two
    (counted if tier == "counted" else plain).reports_usage = False
    text = await _ask(gw, tier, stream)
    [record] = await wait_for(records, timeout_s=30, what="the usage record")
    return record, text


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_without_usage_is_estimated_and_marked_so(two, stream):
    record, text = await _unreported(two, "plain", stream)
    assert record.usage_source == "estimate" and record.tier == "plain"
    assert record.prompt_tokens > 0 and record.completion_tokens > 0 and text


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_without_usage_is_counted_with_the_tiers_tokenizer(two, stream):
    record, text = await _unreported(two, "counted", stream)
    tokenizer = AutoTokenizer.from_pretrained(two[3])
    assert record.usage_source == "tokenizer"
    assert record.prompt_tokens == len(tokenizer.apply_chat_template(HI, add_generation_prompt=True, tokenize=True))
    assert record.completion_tokens == len(tokenizer.encode(text, add_special_tokens=False))


async def test_a_reported_usage_is_the_workers(two):
    gw, _, _, _, records = two
    await _ask(gw, "plain", stream=True)
    [record] = await wait_for(records, timeout_s=5, what="the usage record")
    assert record.usage_source == "worker" and record.completion_tokens == 4


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": HI, "stream": True}),  # the client asks for no usage chunk
    ("/v1/responses", {"input": "say something", "stream": True}),
    ("/v1/messages", {"messages": HI, "max_tokens": 16, "stream": True}),
])
async def test_every_endpoint_asks_the_upstream_for_usage_and_bills_its_count(two, http, path, body):
    gw, _, plain, _, records = two
    async with http.post(gw.url + path, json={**body, "model": "plain"},
                         headers={"Authorization": f"Bearer {KEY}"}) as answer:
        assert answer.status == 200, await answer.text()
        streamed = await answer.read()
    assert plain.seen[-1]["body"]["stream_options"] == {"include_usage": True}
    if path == "/v1/chat/completions":
        assert b'"usage"' not in streamed  # the gateway's usage chunk, dropped: the client did not ask
    [record] = await wait_for(records, timeout_s=5, what="the usage record")
    assert (record.usage_source, record.completion_tokens) == ("worker", 4)
