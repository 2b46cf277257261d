"""Admission reserves each request's worst case (prompt + n x max_tokens at its dearest reachable
tier) in one Lua script, so a hard budget and a tokens-per-minute limit hold under 200 concurrent
requests: spend passes the limit by at most one request's reservation, every refusal is a 429
naming the limit. Settlement releases the reservation (also when nothing was served); a crashed
gateway's reservation expires."""
from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for
from wire.errors import OpenAIError

N, MAX_TOKENS, CONTENT = 4, 64, "how much is this?"
HARD_USD, TPM = 0.01, 3000
PRICE = (1.0, 2.0)  # micro-USD per prompt / completion token


# the capped budget: the tenant's daily or weekly, or its key's own (exact alike: one Lua call)
CAPS = {"tenant_daily": ("tenant", "daily_usd", "daily hard budget of tenant 'capped'"),
        "tenant_weekly": ("tenant", "weekly_usd", "weekly hard budget of tenant 'capped'"),
        "key_weekly": ("key", "weekly_usd", "key_weekly hard budget of key 'k' of tenant 'capped'")}


def _config(url: str, prefix: str, usage_dir, cap: str) -> dict:
    owner, period, _ = CAPS[cap]
    budgets = {period: {"hard": HARD_USD}}
    capped_key = {"id": "k", "sha256": hash_key("sk-capped"), **({"budgets": budgets} if owner == "key" else {})}
    tenants = {"capped": {"keys": [capped_key], **({"budgets": budgets} if owner == "tenant" else {})},
               "metered": {"keys": [{"id": "k", "sha256": hash_key("sk-metered")}],
                           "rate_limits": {"tokens_per_minute": TPM}}}
    small = {**tier("small", 1, [url], price=PRICE), "capabilities": {"n": True}}
    doc = base_config([small], prefix, tenants=tenants,
                      policy={"usage_log": {"dir": str(usage_dir)}, "on_redis_error": "closed"})
    doc["redis"]["socket_timeout_s"] = 5  # a burst on a loaded machine is slow, not an outage
    doc["timeouts"] = {"connect_s": 10.0, "read_s": 30.0}  # 400 connections opened at once, the same
    return doc


async def _burst(http: aiohttp.ClientSession, url: str, key: str, count: int) -> list[tuple[int, dict]]:
    body = {"model": "small", "messages": [{"role": "user", "content": CONTENT}], "n": N, "max_tokens": MAX_TOKENS}

    async def one() -> tuple[int, dict]:
        async with http.post(url + "/v1/chat/completions", json=body,
                             headers={"Authorization": f"Bearer {key}"}) as answer:
            return answer.status, await answer.json()
    return await asyncio.gather(*(one() for _ in range(count)))


async def _usage(http: aiohttp.ClientSession, url: str, key: str) -> dict:
    async with http.get(url + "/v1/usage?days=1", headers={"Authorization": f"Bearer {key}"}) as answer:
        assert answer.status == 200
        report = await answer.json()
    return {"spend": report["month_spend_micro_usd"], "week": report["spend"]["weekly"]["micro_usd"],
            "key_week": report["key"]["spend"]["weekly"]["micro_usd"],
            "tokens": sum(t["prompt_tokens"] + t["completion_tokens"]
                          for day in report["days"] for t in day["tiers"].values())}


@pytest.mark.parametrize("cap", list(CAPS))
async def test_hard_budget_and_tokens_per_minute_hold_under_200_concurrent_requests(
        fakes, gateway, redis_prefix, tmp_path, http, cap):
    (fake, url), = await fakes(1, chunks=MAX_TOKENS)
    fake.count_choices = True  # usage: n x max_tokens completion tokens, the worst case exactly
    gw = await gateway(_config(url, redis_prefix, tmp_path / "usage", cap))
    estimate = len(f"user: {CONTENT}") // 4 + 1
    reservation_tokens = estimate + N * MAX_TOKENS
    reservation_micro = estimate * PRICE[0] + N * MAX_TOKENS * PRICE[1]

    started = time.monotonic()
    capped, metered = await asyncio.gather(_burst(http, gw.url, "sk-capped", 200),
                                           _burst(http, gw.url, "sk-metered", 200))
    elapsed_s = time.monotonic() - started

    for results, code, names in ((capped, "budget_exceeded", CAPS[cap][2]),
                                 (metered, "rate_limit_exceeded", "tenant_tokens_per_minute")):
        statuses = [status for status, _ in results]
        assert statuses.count(200) >= 1 and set(statuses) <= {200, 429}, [r for r in results if r[0] != 200][:3]
        refused = [body["error"] for status, body in results if status == 429]
        assert refused and all(e["code"] == code and names in e["message"] for e in refused), refused[:3]

    spent = await _usage(http, gw.url, "sk-capped")
    # the worker's prompt count may pass the route's estimate by a few tokens a request
    slack = 20 * PRICE[0] * [s for s, _ in capped].count(200)
    assert spent["spend"] <= HARD_USD * 1e6 + reservation_micro + slack, spent
    assert spent["week"] == spent["key_week"] > 0, spent  # the key's own spend, booked by the same settles
    used = await _usage(http, gw.url, "sk-metered")
    refilled = TPM * (elapsed_s + 1) / 60
    slack = 20 * [s for s, _ in metered].count(200)
    assert used["tokens"] <= TPM + refilled + reservation_tokens + slack, (used, elapsed_s)


async def test_a_crashed_admissions_reservation_expires(make_service):
    service = make_service({"t": {"keys": ["kt"], "budgets": {"daily_usd": {"hard": 0.0001}}}},
                           reservation_ttl_s=0.3)
    tenant = service.authenticate("Bearer kt")
    await service.admit(tenant, "req-crashed", 10, 20, tiers=["small"])  # 10 x 0.1 + 20 x 0.2: 5 micro-USD
    # never settled: its gateway crashed. The next worst case (100 micro-USD) does not fit beside it.
    with pytest.raises(OpenAIError) as err:
        await service.admit(tenant, "req-next", 100, 450, tiers=["small"])
    assert err.value.status == 429 and err.value.code == "budget_exceeded"
    assert "daily" in err.value.message and "in flight" in err.value.message
    assert int(err.value.headers["Retry-After"]) <= 2  # not until midnight: in-flight requests hold it

    async def admitted() -> bool:
        try:
            await service.admit(tenant, "req-later", 100, 450, tiers=["small"])
            return True
        except OpenAIError as refusal:
            assert refusal.code == "budget_exceeded"
            return False
    await wait_for(admitted, timeout_s=10, interval_s=0.1, what="the crashed reservation to expire")


async def test_settling_nothing_served_releases_the_reservation(make_service):
    service = make_service({"t": {"keys": ["kt"], "budgets": {"daily_usd": {"hard": 0.0001}},
                                  "rate_limits": {"tokens_per_minute": 1000}}})
    tenant = service.authenticate("Bearer kt")
    first = await service.admit(tenant, "req-1", 100, 450, tiers=["small"])  # 100 micro-USD, 550 tokens
    await service.settle(first, "req-1", "small", 0, 0)                      # no worker answered
    second = await service.admit(tenant, "req-2", 100, 450, tiers=["small"])  # the budget and tokens came back
    await service.settle(second, "req-2", "small", 100, 450)
    with pytest.raises(OpenAIError) as err:                                   # now it is spent
        await service.admit(tenant, "req-3", 1, 1, tiers=["small"])
    assert err.value.code == "budget_exceeded"
    assert (await service.usage(tenant, days=1))["days"][0]["tiers"]["small"]["requests"] == 1


async def test_an_id_admitted_twice_holds_one_reservation(make_service):
    """A batch line run again after its gateway crashed is admitted under the same id: one hold."""
    service = make_service({"t": {"keys": ["kt"], "budgets": {"daily_usd": {"hard": 0.0001}}}})
    tenant = service.authenticate("Bearer kt")
    await service.admit(tenant, "batch_x-0", 100, 200, tiers=["small"])            # 50 micro-USD
    again = await service.admit(tenant, "batch_x-0", 100, 200, tiers=["small"])    # held once, not twice
    await service.settle(again, "batch_x-0", "small", 0, 0)
    await service.admit(tenant, "req-full", 100, 450, tiers=["small"])             # all 100 free again
