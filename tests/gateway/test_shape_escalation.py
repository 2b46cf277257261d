"""Escalation on shape: a whole structured answer that max_tokens cut, or that fails its schema,
is asked once (and only once) of the next tier up; both attempts are billed, the answer is
counted as routed_by escalation, and streams or tenants that opted out are left alone."""
from __future__ import annotations

import glob
import json

import openai
import pytest

from gateway.core.accounting import ROUTED
from gateway.core.metrics import METRICS
from policies.keys import hash_key
from policies.usage_log import read_records
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for

HI = [{"role": "user", "content": "a person please"}]
SCHEMA = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
KEYS = {"eager": "sk-eager-shape-key", "plain": "sk-plain-shape-key", "capped": "sk-capped-shape-key",
        "small-only": "sk-small-only-shape-key", "low-two": "sk-low-two-shape-key"}


@pytest.fixture
async def three(fakes, gateway, redis_prefix, tmp_path):
    (small, s_url), (medium, m_url), (large, l_url) = await fakes(3)
    tenants = {"eager": {"keys": [{"id": "k", "sha256": hash_key(KEYS["eager"])}]},
               "plain": {"keys": [{"id": "k", "sha256": hash_key(KEYS["plain"])}], "structured_escalation": False},
               "capped": {"keys": [{"id": "k", "sha256": hash_key(KEYS["capped"])}],
                          "allowed_tiers": ["small", "large"]},
               "small-only": {"keys": [{"id": "k", "sha256": hash_key(KEYS["small-only"])}],
                              "allowed_tiers": ["small"]},
               "low-two": {"keys": [{"id": "k", "sha256": hash_key(KEYS["low-two"])}],
                           "allowed_tiers": ["small", "medium"]}}
    tiers = [{**tier(name, level, [url]), "capabilities": {"structured_outputs": True}}
             for level, (name, url) in enumerate((("small", s_url), ("medium", m_url), ("large", l_url)), start=1)]
    doc = base_config(tiers,
                      redis_prefix, tenants=tenants, policy={"usage_log": {"dir": str(tmp_path / "usage")}})
    gw = await gateway(doc)
    gw.usage_dir = tmp_path / "usage"
    return gw, small, medium, large


def _client(gw, tenant="eager") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=KEYS[tenant], max_retries=0)


def _count(metric, *labels) -> float:
    return metric.labels(*labels)._value.get()


async def test_a_cut_answer_is_asked_once_of_the_next_tier_and_both_are_billed(three):
    gw, small, medium, large = three
    medium.reply = '{"name":"Ada"}'
    escalations = _count(METRICS.shape_escalations, "small", "medium", "cut")
    routed = _count(ROUTED, "eager", "medium", "escalation")
    async with _client(gw) as client:
        raw = await client.chat.completions.with_raw_response.create(model="small", messages=HI, max_tokens=4,
                                                                     response_format=FORMAT)
    answer = raw.parse()
    assert json.loads(answer.choices[0].message.content) == {"name": "Ada"}
    assert raw.headers["x-tiergate-tier"] == "medium"
    assert (small.served, medium.served, large.served) == (1, 1, 0)
    assert _count(METRICS.shape_escalations, "small", "medium", "cut") == escalations + 1
    assert _count(ROUTED, "eager", "medium", "escalation") == routed + 1
    await wait_for(lambda: len(_records(gw)) == 2, timeout_s=5)
    billed = {(r.request_id == raw.headers["x-request-id"], r.tier) for r in _records(gw)}
    assert billed == {(True, "small"), (False, "medium")}  # the re-ask is billed under an id of its own


async def test_only_one_escalation_even_when_the_next_tier_is_no_better(three):
    gw, small, medium, large = three
    medium.reply = '{"nom":"no name"}'  # parses, fails the schema
    async with _client(gw) as client:
        answer = await client.chat.completions.create(model="small", messages=HI, response_format=FORMAT)
    assert answer.choices[0].message.content == '{"nom":"no name"}'  # the second answer, as it is
    assert (small.served, medium.served, large.served) == (1, 1, 0)


async def test_invalid_content_escalates_and_a_good_answer_does_not(three):
    gw, small, medium, large = three
    small.reply, medium.reply = "not json at all", '{"name":"Bo"}'
    async with _client(gw) as client:
        first = await client.chat.completions.create(model="small", messages=HI, response_format=FORMAT)
        small.reply = '{"name":"Cy"}'
        second = await client.chat.completions.create(model="small", messages=HI, response_format=FORMAT)
        small.reply = None
        plain = await client.chat.completions.create(model="small", messages=HI)  # cut, but unstructured
    assert first.choices[0].message.content == '{"name":"Bo"}' and second.choices[0].message.content == '{"name":"Cy"}'
    assert plain.choices[0].finish_reason == "length"
    assert (small.served, medium.served) == (3, 1)


async def test_streams_and_tenants_that_opted_out_are_not_escalated(three):
    gw, small, medium, large = three
    medium.reply = '{"name":"Ada"}'
    async with _client(gw) as client:
        stream = await client.chat.completions.create(model="small", messages=HI, response_format=FORMAT,
                                                      stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text.startswith("w0")  # the stream had sent text: what was sent stays
    async with _client(gw, "plain") as client:
        answer = await client.chat.completions.create(model="small", messages=HI, response_format=FORMAT)
    assert answer.choices[0].finish_reason == "length"
    assert (small.served, medium.served) == (2, 0)


async def test_escalation_stays_within_the_tenants_allowed_tiers(three):
    gw, small, medium, large = three
    medium.reply = large.reply = '{"name":"Ada"}'
    async with _client(gw, "capped") as client:  # may not use medium: the next tier up it may use is large
        raw = await client.chat.completions.with_raw_response.create(model="small", messages=HI,
                                                                     response_format=FORMAT)
    assert raw.headers["x-tiergate-tier"] == "large" and medium.served == 0 and large.served == 1
    async with _client(gw, "small-only") as client:
        answer = await client.chat.completions.create(model="small", messages=HI, response_format=FORMAT)
    assert answer.choices[0].finish_reason == "length" and (small.served, large.served) == (2, 1)


async def test_the_reask_does_not_fail_over_past_the_tenants_allowed_tiers(three):
    gw, small, medium, large = three
    medium.fail_status, large.reply = 502, '{"name":"Ada"}'
    async with _client(gw, "low-two") as client:  # the re-ask goes to medium, which is down; large is not allowed
        raw = await client.chat.completions.with_raw_response.create(model="small", messages=HI,
                                                                     response_format=FORMAT)
    assert raw.headers["x-tiergate-tier"] == "small" and raw.parse().choices[0].finish_reason == "length"
    assert len(medium.seen) == 1 and len(large.seen) == 0


def _records(gw):
    return read_records(sorted(glob.glob(str(gw.usage_dir / "*"))))
