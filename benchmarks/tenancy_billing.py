"""Every token a worker generates is billed once (issue 55), measured as a client would:
- overshoot: 16 concurrent requests of each prompt that tokenizes large (tool-call arguments, a
  tool definition, 750 emoji; launcher/heavy_prompts.py, counted as a SmolLM2 worker counts
  them) against a hard budget of 1.2 reservations: spend past the budget, in reservations;
- free tokens: what upstreams generated (each generation counted by x-request-id, as our workers
  count) minus what the ledger billed, across answers that time out while generating, streams
  the client cuts, whole answers it cancels, and batch lines run again after 503s;
- held: a stream held open past two lifetimes of its reservation, and how many of the tenant's
  further requests were admitted meanwhile (its hard budget holds one reservation).

Starts a private redis-server, fake upstreams and one in-process gateway on loopback, and stops
them. `python -m benchmarks.tenancy_billing` prints one JSON object as its last line.
"""
from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml

from launcher.fake_upstream import start_fake
from launcher.heavy_prompts import PROMPTS, body, worker_prompt_tokens
from launcher.processes import free_port, start_persistent_redis, stop_processes
from policies.keys import hash_key
from wire.prompt_bound import prompt_token_bound
from wire.requests import parse_chat

PRICE = {"input": 2.5, "output": 10.0}  # micro-USD per token
ATTEMPTS, CONCURRENCY, READ_S, RESERVATION_TTL_S = 3, 16, 0.5, 2.0
LONG = 300  # tokens of an answer that outlasts READ_S (one per 5 ms)
HELD = {"model": "held", "messages": [{"role": "user", "content": "count"}], "max_tokens": 60}


def _reservation(payload: dict, max_tokens: int) -> float:
    return ATTEMPTS * (prompt_token_bound(parse_chat(payload)) * PRICE["input"] + max_tokens * PRICE["output"])


def _config(urls: dict[str, str], redis_port: int, usage_dir: Path) -> dict:
    def tenant(key: str, hard_micro: float | None = None) -> dict:
        budgets = {"budgets": {"daily_usd": {"hard": round(hard_micro / 1e6, 6)}}} if hard_micro else {}
        return {"keys": [{"id": "k", "sha256": hash_key(key)}], **budgets}
    tiers = [{"name": name, "level": level, "model": f"m-{name}", "price_per_mtok": PRICE,
              "capabilities": {"tools": True}, "workers": [{"url": url}]}
             for level, (name, url) in enumerate(urls.items(), start=1)]
    tenants = {f"capped-{kind}": tenant(f"sk-{kind}", 1.2 * _reservation(body(kind, "heavy"), 1)) for kind in PROMPTS}
    tenants["metered"] = tenant("sk-metered")
    tenants["held"] = tenant("sk-held", 1.5 * _reservation(HELD, HELD["max_tokens"]))
    return {"tiers": tiers, "failover": {"max_attempts": ATTEMPTS, "escalate": False},
            "timeouts": {"connect_s": 1.0, "read_s": READ_S}, "breaker": {"open_s": 0.2},
            "redis": {"url": f"redis://127.0.0.1:{redis_port}/0", "key_prefix": "bench:", "socket_timeout_s": 5},
            "policy": {"usage_log": {"dir": str(usage_dir)}, "on_redis_error": "closed"}, "tenants": tenants}


async def _post(http: aiohttp.ClientSession, url: str, key: str, payload: dict) -> int:
    async with http.post(url + "/v1/chat/completions", json=payload, headers={"Authorization": f"Bearer {key}"}) as r:
        await r.read()
        return r.status


async def _billed(http: aiohttp.ClientSession, url: str, key: str) -> tuple[int, int]:
    """(spend in micro-USD, prompt + completion tokens billed) of the key's tenant today."""
    async with http.get(url + "/v1/usage?days=1", headers={"Authorization": f"Bearer {key}"}) as answer:
        report = await answer.json()
    tokens = sum(t["prompt_tokens"] + t["completion_tokens"] for day in report["days"] for t in day["tiers"].values())
    return report["month_spend_micro_usd"], tokens


async def _overshoot(http, url: str) -> dict:
    out = {}
    for kind in PROMPTS:
        payload = body(kind, "heavy")
        statuses = await asyncio.gather(*(_post(http, url, f"sk-{kind}", payload) for _ in range(CONCURRENCY)))
        spend, _ = await _billed(http, url, f"sk-{kind}")
        reservation = _reservation(payload, 1)
        out[kind] = {"overshoot_reservations": round(max(0.0, spend - 1.2 * reservation) / reservation, 3),
                     "served": statuses.count(200), "refused_429": statuses.count(429),
                     "worker_prompt_tokens": worker_prompt_tokens(payload),
                     "prompt_bound": prompt_token_bound(parse_chat(payload))}
    return out


async def _cut_stream(http, url: str) -> None:
    payload = {"model": "long", "messages": [{"role": "user", "content": "go on"}], "max_tokens": LONG, "stream": True}
    async with http.post(url + "/v1/chat/completions", json=payload, headers={"Authorization": "Bearer sk-metered"}) as r:
        for _ in range(10):
            await r.content.readline()
        r.close()


async def _cancelled_whole(http, url: str) -> None:
    task = asyncio.create_task(_post(http, url, "sk-metered", {
        "model": "long", "messages": [{"role": "user", "content": "go on"}], "max_tokens": LONG}))
    await asyncio.sleep(READ_S / 2)
    task.cancel()


async def _batch_lines(state, fake, lines: int) -> int:
    """Lines whose first run meets 503s after admission and that run again, as the runner does."""
    from gateway.api.handlers import serve
    from gateway.batches.jsonl import BatchLine
    from gateway.batches.lines import TryLater, run_line
    from gateway.core.relay import Delivery

    tenant = state.services.sinks.policy.authenticate("Bearer sk-metered")
    line = BatchLine("c", "/v1/chat/completions", {"model": "retried", "messages": [{"role": "user", "content": "x"}],
                                                   "max_tokens": 8})
    done = 0
    for index in range(lines):
        fake.fail_status = 503
        for _ in range(20):
            try:
                await run_line(lambda call, gate: serve(state.services, call, Delivery(), gate), tenant,
                               "batch_bench", index, line, None)
                done += 1
                break
            except TryLater:
                fake.fail_status = None  # the worker is back for the line's next run
                await asyncio.sleep(0.3)
    return done


async def _free_tokens(http, url: str, state, fakes: dict) -> dict:
    long_fake, retried_fake = fakes["long"], fakes["retried"]
    timed_out = [await _post(http, url, "sk-metered", {"model": "long", "messages": [
        {"role": "user", "content": "go on"}], "max_tokens": LONG}) for _ in range(5)]
    for _ in range(5):
        await _cut_stream(http, url)
        await _cancelled_whole(http, url)
    lines = await _batch_lines(state, retried_fake, 5)
    generated = long_fake.generated + retried_fake.generated
    deadline = time.monotonic() + 10
    while True:  # the cancelled requests settle after their clients left
        _, billed = await _billed(http, url, "sk-metered")
        if billed >= generated or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    return {"free_tokens": generated - billed, "generated_tokens": generated, "billed_tokens": billed,
            "timeouts_504": timed_out.count(504), "cut_streams": 5, "cancelled_whole": 5, "batch_lines_done": lines}


async def _held(http, url: str) -> dict:
    async with http.post(url + "/v1/chat/completions", json={**HELD, "stream": True},
                         headers={"Authorization": "Bearer sk-held"}) as streaming:
        await streaming.content.readline()
        await asyncio.sleep(2 * RESERVATION_TTL_S)
        still_streaming = not streaming.content.at_eof()
        admitted = [await _post(http, url, "sk-held", HELD) for _ in range(5)].count(200)
        await streaming.read()
    return {"held_s": 2 * RESERVATION_TTL_S, "still_streaming": still_streaming, "admitted_meanwhile": admitted,
            "reservation_ttl_s": RESERVATION_TTL_S}


async def _measure(work: Path) -> dict:
    from gateway.app import build_app, start_site
    from gateway.config import load_config
    from gateway.core.policy_seam import build_policy_service
    from gateway.state import GatewayState

    redis_port = free_port()
    redis = start_persistent_redis(redis_port, work)
    fakes, runners, urls = {}, [], {}
    for name, chunks, delay in (("heavy", 1, 0.0), ("long", LONG, 0.005), ("retried", 8, 0.0), ("held", 60, 0.1)):
        fake, runner, urls[name] = await start_fake(name=name, chunks=chunks, chunk_delay_s=delay)
        fakes[name] = fake
        runners.append(runner)
    fakes["heavy"].count_prompt = worker_prompt_tokens
    for name in ("long", "retried"):  # they answer the abort route and pace whole answers, as workers do
        fakes[name].abortable = fakes[name].paced = True
    path = work / "tiergate.yaml"
    path.write_text(yaml.safe_dump(_config(urls, redis_port, work / "usage")))
    state = GatewayState(load_config(path), str(path),
                         policy_factory=lambda config, r: build_policy_service(config, r, RESERVATION_TTL_S))
    runner = await start_site(build_app(state), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            overshoot = await _overshoot(http, url)
            free = await _free_tokens(http, url, state, fakes)
            held = await _held(http, url)
    finally:
        await runner.cleanup()
        for each in runners:
            await each.cleanup()
        stop_processes([redis])
    return {"overshoot": overshoot, "free": free, "held": held}


def measure() -> dict:
    with tempfile.TemporaryDirectory(prefix="tiergate-billing-") as work:
        return asyncio.run(_measure(Path(work)))


if __name__ == "__main__":
    print(json.dumps(measure()))
