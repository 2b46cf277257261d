"""Admission reserves what the worker will render and reservations live as long as the work
(issue 55, findings 1 and 4): a gateway with tenants in front of fake upstreams that report the
prompt count a real SmolLM2 worker gives (launcher/heavy_prompts.py), on the shared Redis.
Each test says what it guards and fails on 45d8644."""
from __future__ import annotations

import asyncio
import glob
import json

import pytest

from launcher.heavy_prompts import PROMPTS, body, worker_prompt_tokens
from gateway.core.policy_seam import build_policy_service
from policies.keys import hash_key
from policies.usage_log import read_records
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for
from wire.prompt_bound import prompt_token_bound
from wire.requests import parse_chat

KEY = "sk-bounds-key"
PRICE = (2.5, 10.0)  # micro-USD per prompt / completion token (the example's large tier)


def _doc(url: str, prefix: str, usage_dir, hard_usd: float | None = None, **sections) -> dict:
    acme = {"keys": [{"id": "k", "sha256": hash_key(KEY)}]}
    if hard_usd is not None:
        acme["budgets"] = {"daily_usd": {"hard": round(hard_usd, 6)}}
    large = {**tier("large", 1, [url], price=PRICE), "capabilities": {"tools": True}}
    doc = base_config([large], prefix, tenants={"acme": acme},
                      policy={"usage_log": {"dir": str(usage_dir), "fsync": "always"}, "on_redis_error": "closed"},
                      **sections)
    doc["redis"]["socket_timeout_s"] = 5  # a burst on a loaded machine is slow, not an outage
    return doc


def _records(usage_dir):
    return read_records(sorted(glob.glob(str(usage_dir / "*"))))


async def _post(http, gw, payload: dict) -> int:
    async with http.post(gw.url + "/v1/chat/completions", json=payload,
                         headers={"Authorization": f"Bearer {KEY}"}) as answer:
        said = await answer.read()
        assert answer.status in (200, 429), said
        return answer.status


async def _spend(http, gw) -> int:
    async with http.get(gw.url + "/v1/usage?days=1", headers={"Authorization": f"Bearer {KEY}"}) as answer:
        return (await answer.json())["month_spend_micro_usd"]


@pytest.mark.parametrize("kind", list(PROMPTS))
async def test_a_hard_budget_holds_under_prompts_that_tokenize_large(kind, fakes, gateway, redis_prefix, tmp_path,
                                                                     http):
    """Finding 1: 16 concurrent requests whose prompt is mostly tool-call arguments, a tool
    definition or emoji, against a hard budget that holds one reservation: the spend stays within it
    (45d8644 priced a quarter of the message contents' characters and served all 16: 479x)."""
    (fake, url), = await fakes(1, chunks=1)
    fake.count_prompt = worker_prompt_tokens
    payload = body(kind, "large")
    reservation = 3 * (prompt_token_bound(parse_chat(payload)) * PRICE[0] + PRICE[1])  # 3 attempts
    hard = int(1.2 * reservation)  # micro-USD: one request's reservation fits, 16 real costs do not
    gw = await gateway(_doc(url, redis_prefix, tmp_path / "usage", hard_usd=hard / 1e6))
    statuses = await asyncio.gather(*(_post(http, gw, payload) for _ in range(16)))
    assert statuses.count(200) >= 1 and set(statuses) <= {200, 429}
    assert await _spend(http, gw) <= hard


async def test_a_cut_stream_without_an_abort_endpoint_is_billed_the_prompts_bound(fakes, gateway, redis_prefix,
                                                                                 tmp_path, http):
    """Finding 1: a tier with no abort endpoint (the fake has none) and no `tokenizer:`: a stream
    the client cuts before its usage chunk is billed the prompt's bound, never less than the
    worker rendered (45d8644 billed a quarter of the contents' characters: 190 for 2,280)."""
    (fake, url), = await fakes(1, chunks=200, chunk_delay_s=0.02)
    gw = await gateway(_doc(url, redis_prefix, tmp_path / "usage"))
    payload = body("emoji", "large", max_tokens=200, stream=True)
    async with http.post(gw.url + "/v1/chat/completions", json=payload,
                         headers={"Authorization": f"Bearer {KEY}"}) as answer:
        assert answer.status == 200
        async for line in answer.content:
            if line.startswith(b"data: {") and json.loads(line[6:])["choices"]:
                break
        answer.close()  # the client leaves mid-stream
    [record] = await wait_for(lambda: _records(tmp_path / "usage"), timeout_s=20, what="the cut stream's record")
    assert record.usage_source == "estimate"
    assert record.prompt_tokens == prompt_token_bound(parse_chat(payload)) >= worker_prompt_tokens(payload)


async def test_the_bound_prices_money_only_not_the_context_a_tier_must_hold(fakes, gateway, redis_prefix, tmp_path,
                                                                            http):
    """Finding 1: a CJK prompt whose byte bound is past the small tier's context but whose
    estimate fits is still served by the small tier (not pushed up, not refused)."""
    (small, s_url), (large, l_url) = await fakes(2, chunks=1)
    cjk = "漢字語" * 300  # 900 characters: estimated 226 tokens, bounded at 2,700+
    tiers = [{**tier("small", 1, [s_url]), "capabilities": {"max_context_tokens": 1024}},
             tier("large", 2, [l_url])]
    doc = base_config(tiers, redis_prefix, tenants={"acme": {"keys": [{"id": "k", "sha256": hash_key(KEY)}]}},
                      policy={"usage_log": {"dir": str(tmp_path / "usage")}})
    gw = await gateway(doc)
    assert prompt_token_bound(parse_chat({"model": "small", "messages": [{"role": "user", "content": cjk}]})) > 1024
    async with http.post(gw.url + "/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"},
                         json={"model": "small", "messages": [{"role": "user", "content": cjk}], "max_tokens": 8}) as r:
        assert r.status == 200 and r.headers["x-tiergate-tier"] == "small"


async def test_a_stream_held_past_its_reservations_lifetime_admits_nothing_more(fakes, gateway, redis_prefix,
                                                                               tmp_path, http):
    """Finding 4: a tenant at its hard budget holds a stream open past the reservation's
    original lifetime (1.5 s here); the reservation is renewed while it runs, so a second
    request is still refused, and admitted once the stream ended and settled (45d8644: the
    reservation expired mid-stream and the second request was admitted)."""
    (fake, url), = await fakes(1, chunks=60, chunk_delay_s=0.1)  # a 6 s stream
    payload = {"model": "large", "messages": [{"role": "user", "content": "count"}], "max_tokens": 60}
    reservation = 3 * (prompt_token_bound(parse_chat(payload)) * PRICE[0] + 60 * PRICE[1])
    doc = _doc(url, redis_prefix, tmp_path / "usage", hard_usd=1.5 * reservation / 1e6)
    gw = await gateway(doc, policy_factory=lambda config, redis: build_policy_service(config, redis, 1.5))
    async with http.post(gw.url + "/v1/chat/completions", json={**payload, "stream": True},
                         headers={"Authorization": f"Bearer {KEY}"}) as streaming:
        assert streaming.status == 200
        started = asyncio.get_running_loop().time()
        await streaming.content.readline()
        await asyncio.sleep(max(0.0, started + 3.0 - asyncio.get_running_loop().time()))  # 2 lifetimes
        assert not streaming.content.at_eof()
        assert await _post(http, gw, payload) == 429
        await streaming.read()
    await wait_for(lambda: _records(tmp_path / "usage"), timeout_s=10, what="the stream's record")
    assert len(gw.state.services.sinks.policy.renewals) == 0  # settled: no longer renewed
    assert await _post(http, gw, {**payload, "max_tokens": 1}) == 200
