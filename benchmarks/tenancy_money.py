"""Money and identity under a tenant's own traffic: hard-budget overshoot at 200-way concurrency
(as a ratio of one request's reservation), free requests from a replayed x-request-id (served
minus billed), and what reserving at admission costs (p50 of the policy's admit() with its
reservation against a plain read of the settled spend, both on the same Redis).

Starts a private redis-server, a fake upstream and one in-process gateway on loopback, and stops
them. `python -m benchmarks.tenancy_money` prints one JSON object as its last line.
"""
from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml

from launcher.fake_upstream import start_fake
from launcher.processes import free_port, start_persistent_redis, stop_processes
from policies.keys import hash_key
from wire.prompt_bound import prompt_token_bound
from wire.requests import parse_chat

CONCURRENCY, N, MAX_TOKENS, DAILY_HARD_USD = 200, 4, 64, 0.01
PRICE = {"input": 1.0, "output": 2.0}
CONTENT = "how much is this?"
REPLAYS = 20
LATENCY_CALLS = 500


def _config(upstream: str, redis_port: int, usage_dir: Path) -> dict:
    def tenant(key: str, **policy) -> dict:
        return {"keys": [{"id": "k", "sha256": hash_key(key)}], **policy}
    return {"tiers": [{"name": "small", "level": 1, "model": "m-small", "price_per_mtok": PRICE,
                       "capabilities": {"n": True}, "workers": [{"url": upstream}]}],
            "redis": {"url": f"redis://127.0.0.1:{redis_port}/0", "key_prefix": "bench:", "socket_timeout_s": 5},
            "policy": {"usage_log": {"dir": str(usage_dir)}, "on_redis_error": "closed"},
            "tenants": {"capped": tenant("sk-capped", budgets={"daily_usd": {"hard": DAILY_HARD_USD}}),
                        "replay": tenant("sk-replay"),
                        "timed": tenant("sk-timed", budgets={"daily_usd": {"hard": 1_000_000}})}}


async def _post(http: aiohttp.ClientSession, url: str, key: str, **headers: str) -> int:
    body = {"model": "small", "messages": [{"role": "user", "content": CONTENT}], "n": N, "max_tokens": MAX_TOKENS}
    async with http.post(url + "/v1/chat/completions", json=body,
                         headers={"Authorization": f"Bearer {key}", **headers}) as answer:
        await answer.read()
        return answer.status


async def _usage(http: aiohttp.ClientSession, url: str, key: str) -> tuple[int, int]:
    """(spend in micro-USD, requests billed) of the key's tenant today."""
    async with http.get(url + "/v1/usage?days=1", headers={"Authorization": f"Bearer {key}"}) as answer:
        report = await answer.json()
    billed = sum(t["requests"] for day in report["days"] for t in day["tiers"].values())
    return report["month_spend_micro_usd"], billed


async def _p50_ms(call, times: int) -> float:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000.0)
    return round(statistics.median(samples), 4)


async def _measure(work: Path) -> dict:
    from gateway.app import build_app, start_site
    from gateway.config import load_config
    from gateway.state import GatewayState

    redis_port = free_port()
    redis = start_persistent_redis(redis_port, work)
    fake, fake_runner, upstream = await start_fake(chunks=MAX_TOKENS)
    fake.count_choices = True  # usage is n x max_tokens: every request spends its whole reservation
    path = work / "tiergate.yaml"
    path.write_text(yaml.safe_dump(_config(upstream, redis_port, work / "usage")))
    state = GatewayState(load_config(path), str(path))
    runner = await start_site(build_app(state), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            statuses = await asyncio.gather(*(_post(http, url, "sk-capped") for _ in range(CONCURRENCY)))
            spend, _ = await _usage(http, url, "sk-capped")
            # what admission reserves: the prompt's bound, for every attempt (failover.max_attempts: 3)
            estimate = prompt_token_bound(parse_chat({"model": "small", "messages": [
                {"role": "user", "content": CONTENT}]}))
            reservation = 3 * (estimate * PRICE["input"] + N * MAX_TOKENS * PRICE["output"])
            overshoot = max(0.0, spend - DAILY_HARD_USD * 1e6) / reservation

            replayed = [await _post(http, url, "sk-replay", **{"x-request-id": "same-id"}) for _ in range(REPLAYS)]
            _, billed = await _usage(http, url, "sk-replay")

        policy = state.services.sinks.policy
        tenant = policy.authenticate("Bearer sk-timed")
        seq = iter(range(10 ** 9))
        now = policy.clock()
        day, month = now.strftime("%Y-%m-%d"), now.strftime("%Y-%m")
        admit_ms = await _p50_ms(lambda: policy.admit(tenant, f"req-bench-{next(seq)}", estimate, MAX_TOKENS, n=N,
                                                      tiers=["small"]), LATENCY_CALLS)
        spend_ms = await _p50_ms(lambda: policy.store.spend("timed", day, month), LATENCY_CALLS)
    finally:
        await runner.cleanup()
        await fake_runner.cleanup()
        stop_processes([redis])
    return {"budget_overshoot_ratio": round(overshoot, 3), "budget_served": statuses.count(200),
            "budget_refused_429": statuses.count(429), "concurrency": CONCURRENCY,
            "reservation_micro_usd": reservation,
            "free_requests": replayed.count(200) - billed, "replayed_served": replayed.count(200),
            "admit_reserving_p50_ms": admit_ms, "settled_spend_read_p50_ms": spend_ms,
            "reserve_added_p50_ms": round(admit_ms - spend_ms, 4),
            "latency_note": "p50 of PolicyService.admit() (one admit.lua call with its reservation) minus p50 of "
                            "one MGET of the settled day/month spend, sequential, same private redis-server"}


def measure() -> dict:
    with tempfile.TemporaryDirectory(prefix="tiergate-money-") as work:
        return asyncio.run(_measure(Path(work)))


if __name__ == "__main__":
    print(json.dumps(measure()))
