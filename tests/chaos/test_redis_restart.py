"""Our own Redis (free port, AOF on) is SIGKILLed and restarted under client load through a real
gateway with tenants, fail-closed: clients only ever see 200 or the documented 503 (with
Retry-After); the gateway recovers by itself, and the ledger equals the usage log afterwards."""
from __future__ import annotations

import asyncio
import signal

import aiohttp

from measure.scale import chaos_scale
from tests.support import start_persistent_redis as start_redis, wait_for
from tests.chaos.chaos_helpers import config
from policies.keys import hash_key
from policies.usage_log import read_records

KEY = "sk-chaos-tenant"


async def test_redis_killed_and_restarted_under_load(own_redis, fakes, gateway, tmp_path):
    port, data, procs = own_redis
    [(upstream, url)] = await fakes(1)
    logs = tmp_path / "usage"
    doc = config([url], "tgchaos:", f"redis://127.0.0.1:{port}/0",
                 policy={"on_redis_error": "closed",
                         "usage_log": {"dir": str(logs), "fsync": "always"}},
                 tenants={"chaos": {"keys": [{"id": "k", "sha256": hash_key(KEY)}],
                                    "rate_limits": {"requests_per_minute": 100000}}})
    gw = await gateway(doc)
    headers = {"Authorization": f"Bearer {KEY}"}
    seen: dict = {}
    done = asyncio.Event()  # load runs until the restart has been served through

    def count(status, retry_after=None) -> int:
        return seen.get((status, retry_after), 0)

    async def client(session, c):
        i = 0
        while not done.is_set():
            i += 1
            body = {"model": "small", "messages": [{"role": "user", "content": f"c{c} r{i} " * (1 + i % 5)}],
                    "stream": i % 2 == 0}
            async with session.post(f"{gw.url}/v1/chat/completions", json=body, headers=headers,
                                    timeout=aiohttp.ClientTimeout(total=5)) as r:
                await r.read()
                key = (r.status, r.headers.get("Retry-After") is not None if r.status == 503 else None)
                seen[key] = seen.get(key, 0) + 1
            await asyncio.sleep(0.01)

    async def chaos():
        await wait_for(lambda: count(200) >= 10, timeout_s=10)  # load is flowing
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        await wait_for(lambda: count(503, True) >= 5 * chaos_scale(), timeout_s=10)  # the outage is felt
        procs.append(await asyncio.to_thread(start_redis, port, data))  # same dir: replays the AOF
        served = count(200)
        await wait_for(lambda: count(200) >= served + 10, timeout_s=15)  # and served again after it
        done.set()

    async with aiohttp.ClientSession() as session:
        clients = (client(session, c) for c in range(4 * chaos_scale()))
        await asyncio.wait_for(asyncio.gather(chaos(), *clients), 20 * chaos_scale())
        print(seen)
        assert set(seen) <= {(200, None), (503, True)}, seen   # nothing but served or the documented 503
        assert seen.get((503, True), 0) > 0 and seen.get((200, None), 0) > 0
        # recovered by itself; this request's settle also replays the settles queued during the outage
        async def served_after() -> bool:
            async with session.post(f"{gw.url}/v1/chat/completions", headers=headers,
                                    json={"model": "small", "messages": [{"role": "user", "content": "after"}]}) as r:
                return r.status == 200

        await wait_for(served_after, timeout_s=10, interval_s=0.2)
        records = read_records([str(p) for p in logs.glob("*.jsonl")])
        logged = sum(r.cost_micro for r in records if r.tenant == "chaos")
        async with session.get(f"{gw.url}/v1/usage", headers=headers) as r:
            assert r.status == 200
            ledger = (await r.json())["month_spend_micro_usd"]
    assert logged > 0 and ledger == logged, (ledger, logged)
    assert upstream.in_flight == 0
