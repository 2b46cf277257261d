"""Two real gateway processes against one Redis prefix: rate limits, budgets, prefix affinity
and quality adjustments are shared state, so a client sees one gateway whichever replica it hits."""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis

from gateway.quality.config import QualityConfig
from gateway.quality.store import QualityStore
from policies.keys import hash_key
from tests.support import SHARED_REDIS, wait_for
from tests.support.stack import Stack

LIMIT = 7
TENANTS = {"limited": {"rate_limits": {"requests_per_minute": LIMIT}},
           "spender": {"rate_limits": {"requests_per_minute": 100000}},
           "affine": {"rate_limits": {"requests_per_minute": 100000}}}


ADMIN_KEY = "sk-admin-" + uuid.uuid4().hex


def tenant_key(name: str) -> str:
    return f"sk-{name}-{uuid.uuid5(uuid.NAMESPACE_URL, ADMIN_KEY + name).hex}"


def replica_config(upstreams: list[str], log_dir: Path) -> dict:
    """Tier `small` spread over every upstream (so affinity has a choice), `large` on the first."""
    price = {"input": 1.0, "output": 2.0}
    tiers = [{"name": "small", "level": 1, "model": "m-small", "price_per_mtok": price,
              "workers": [{"url": u} for u in upstreams]},
             {"name": "large", "level": 2, "model": "m-large", "price_per_mtok": price,
              "workers": [{"url": upstreams[0]}]}]
    return {"tiers": tiers, "timeouts": {"connect_s": 1.0, "read_s": 5.0},
            "affinity": {"chunk_chars": 64, "load_margin": 1000},  # affinity must win over load balance here
            "quality": {"enabled": True, "sampling_rate": 0.0, "window": 4, "min_samples": 4, "refresh_s": 0.2},
            "policy": {"admin_key_sha256": hash_key(ADMIN_KEY), "usage_log": {"dir": str(log_dir)}},
            "tenants": {name: {"keys": [{"id": "k", "sha256": hash_key(tenant_key(name))}], **spec}
                        for name, spec in TENANTS.items()}}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Two gateway processes (`python -m gateway.process`) on one config and one Redis prefix, in front
    of two fake-upstream processes."""
    with Stack(tmp_path_factory.mktemp("replicas"), "chaos") as running:
        running.start_gateways(replica_config(running.start_upstreams(2), running.tmp / "usage"), count=2)
        yield running


def auth(tenant: str) -> dict:
    return {"Authorization": f"Bearer {tenant_key(tenant)}"}


async def chat(session, url: str, tenant: str, messages: list, model: str = "small"):
    async with session.post(f"{url}/v1/chat/completions", headers=auth(tenant),
                            json={"model": model, "messages": messages, "max_tokens": 4}) as response:
        return response.status, dict(response.headers), await response.json()


def user(text: str) -> list:
    return [{"role": "user", "content": text}]


async def test_rate_limit_is_enforced_across_both_replicas(stack):
    async with aiohttp.ClientSession() as session:
        answers = await asyncio.gather(*(chat(session, stack.urls[i % 2], "limited", user(f"q{i}"))
                                         for i in range(3 * LIMIT)))
    statuses = [status for status, _, _ in answers]
    # each replica got 10 or 11 requests, so per-replica counters would admit 2 * LIMIT: exactly
    # LIMIT proves one shared counter. Which replica admitted them is up to the OS scheduler.
    assert statuses.count(200) == LIMIT, statuses
    assert statuses.count(429) == 2 * LIMIT, statuses
    limited = next(body for status, _, body in answers if status == 429)
    assert limited["error"]["type"] and limited["error"]["code"] == "rate_limit_exceeded"


async def test_spend_from_both_replicas_is_visible_from_either(stack):
    async with aiohttp.ClientSession() as session:
        async def spend(url):
            async with session.get(f"{url}/v1/usage", headers=auth("spender")) as response:
                assert response.status == 200
                return (await response.json())["month_spend_micro_usd"]

        assert await spend(stack.urls[0]) == 0
        costs = []
        for i in range(6):
            status, _, body = await chat(session, stack.urls[i % 2], "spender", user("spend " * (10 + i)))
            assert status == 200
            u = body["usage"]
            costs.append(u["prompt_tokens"] * 1.0 + u["completion_tokens"] * 2.0)  # micro-USD at $1/$2 per Mtok
        await wait_for(lambda: _reached(spend(stack.urls[0]), sum(costs)), timeout_s=10)  # settled after the answer
        seen = [await spend(url) for url in stack.urls]
    assert seen[0] == seen[1] == round(sum(costs)), (seen, costs)


async def _reached(value, target) -> bool:
    return await value >= target


async def test_conversation_sticks_to_its_upstream_across_replicas(stack):
    client = aioredis.Redis.from_url(SHARED_REDIS)

    async def affinity_keys() -> int:
        return len([k async for k in client.scan_iter(match=stack.prefix + "aff:*", count=1000)])

    async with aiohttp.ClientSession() as session:
        backends = set()
        for c in range(6):
            history = user(f"conversation {c}: " + "a long shared system context that gets cached. " * 8)
            known = await affinity_keys()
            status, headers, body = await chat(session, stack.urls[0], "affine", history)
            assert status == 200
            first = headers["x-tiergate-backend"]
            backends.add(first)
            history = history + [body["choices"][0]["message"], {"role": "user", "content": "and then?"}]
            await wait_for(lambda: _reached(affinity_keys(), known + 1), timeout_s=10)  # written after the answer
            for _ in range(3):
                status, headers, _ = await chat(session, stack.urls[1], "affine", history)
                assert status == 200 and headers["x-tiergate-backend"] == first, (c, first, headers)
    await client.aclose()
    assert len(backends) == 2, backends  # conversations were spread, so sticking was not luck


async def test_quality_adjustment_written_once_is_read_by_both(stack):
    client = aioredis.Redis.from_url(SHARED_REDIS)
    store = QualityStore(client, stack.prefix)
    q = QualityConfig(window=4, min_samples=4)
    results = [await store.record("t", "small", 1, True, q) for _ in range(4)]  # the monitor's own write path
    await client.aclose()
    assert results[-1].step == 1 and results[-1].changed == 1
    async with aiohttp.ClientSession() as session:
        async def view(url):
            async with session.get(f"{url}/v1/quality", headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as r:
                assert r.status == 200
                return await r.json()

        async def views_shifted():  # replicas re-read shared state every refresh_s
            views = [await view(url) for url in stack.urls]
            return all(v["threshold_shift"] for v in views) and views

        views = await wait_for(views_shifted, timeout_s=10)
    for v in views:
        assert v["tiers"]["small"]["adjustment_steps"] == 1
        assert v["tiers"]["small"]["window"] == {"samples": 4, "failed": 4, "failure_rate": 1.0}
        assert v["threshold_shift"] == {"2": -0.1}, v["threshold_shift"]
