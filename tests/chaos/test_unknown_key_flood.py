"""A flood of unknown (and revoked) keys is refused from each replica's memory: Redis sees no
command per request. The gateway runs on its own redis-server, so every command Redis counts
is this gateway's (the shared one has other tests' traffic)."""
from __future__ import annotations

import asyncio

import aiohttp
import redis

from policies.keys import hash_key
from tests.support import free_port, start_persistent_redis, stop_processes
from tests.support.stack import Stack

ADMIN = "sk-flood-admin"
FLOOD = 400


def _commands(port: int) -> int:
    return int(redis.Redis(port=port).info("stats")["total_commands_processed"])


async def test_unknown_and_revoked_keys_cost_redis_nothing_per_request(tmp_path):
    port = free_port()
    server = start_persistent_redis(port, tmp_path)
    try:
        with Stack(tmp_path / "stack", "flood") as stack:
            upstream, = await asyncio.to_thread(stack.start_upstreams, 1)
            doc = {"tiers": [{"name": "small", "level": 1, "model": "m", "price_per_mtok": {"input": 1, "output": 1},
                              "workers": [{"url": upstream}]}],
                   "redis": {"url": f"redis://127.0.0.1:{port}/0"},
                   "policy": {"admin_key_sha256": hash_key(ADMIN), "usage_log": {"dir": str(tmp_path / "logs")}}}
            url, = await asyncio.to_thread(stack.start_gateways, doc)
            async with aiohttp.ClientSession() as http:
                auth = {"Authorization": f"Bearer {ADMIN}"}
                async with http.post(url + "/admin/tenants", json={"name": "t"}, headers=auth) as r:
                    assert r.status == 200
                async with http.post(url + "/admin/keys", json={"tenant": "t"}, headers=auth) as r:
                    key = await r.json()
                async with http.post(f"{url}/admin/keys/{key['id']}/revoke", headers=auth) as r:
                    assert r.status == 200
                before = await asyncio.to_thread(_commands, port)

                async def knock(i: int) -> str:
                    secret = key["secret"] if i % 2 else f"sk-tg-unknown{i:040d}"
                    async with http.post(url + "/v1/chat/completions", json={"model": "small", "messages": []},
                                         headers={"Authorization": f"Bearer {secret}"}) as r:
                        assert r.status == 401
                        return (await r.json())["error"]["code"]

                codes = [await knock(i) for i in range(FLOOD)]
                after = await asyncio.to_thread(_commands, port)
    finally:
        stop_processes([server])
    assert set(codes) == {"invalid_api_key", "key_revoked"}
    # background work (the registry's version poll, the quality and console refreshes) only
    assert after - before < FLOOD / 8, (before, after)
