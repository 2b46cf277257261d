"""End to end: two gateway processes (`python -m gateway`) in front of a fake OpenAI upstream,
sharing the real Redis, with tenants configured. 500 concurrent requests of one tenant limited to
100/min -> exactly 100 answered, 400 get 429 rate_limit_exceeded; /v1/usage agrees with the
usage logs to the micro-dollar; keys are enforced; tenants cannot see each other."""
from __future__ import annotations

import asyncio
import glob
import os

import aiohttp
import openai
import pytest

from policies.keys import hash_key
from policies.usage_log import read_records
from tests.support.stack import Stack
from tests.support.kinds import starts_processes


def _config(upstream: str, log_dir: str) -> dict:
    return {
        "tiers": [{"name": "small", "level": 1, "model": "m-small", "price_per_mtok": {"input": 0.1, "output": 0.2},
                   "workers": [{"url": upstream}]},
                  {"name": "large", "level": 3, "model": "m-large", "price_per_mtok": {"input": 2.5, "output": 10},
                   "workers": [{"url": upstream}]}],
        # A saturated event loop on this shared 2-core machine can read Redis replies late; generous
        # timeouts and fail-closed make any Redis trouble show up as 503 instead of silent over-admission.
        "redis": {"socket_timeout_s": 5},
        "policy": {"admin_key_sha256": hash_key("sk-admin"), "usage_log": {"dir": log_dir},
                   "on_redis_error": "closed"},
        "tenants": {"burst": {"keys": [{"id": "main", "sha256": hash_key("sk-burst")}],
                              "rate_limits": {"requests_per_minute": 100}, "pinned_routes": {"cheap": "small"}},
                    "other": {"keys": [{"id": "main", "sha256": hash_key("sk-other")}],
                              "pinned_routes": {"cheap": "small"}}},
    }


@pytest.fixture
@starts_processes
async def two_gateways(tmp_path):
    with Stack(tmp_path / "processes", "pol") as stack:
        upstream, = await asyncio.to_thread(stack.start_upstreams, 1, "--chunks", "7")
        await asyncio.to_thread(stack.start_gateways, _config(upstream, str(tmp_path / "logs")), 2, True)
        async with aiohttp.ClientSession() as http:
            yield http, stack.urls, tmp_path / "logs"


async def test_limits_usage_and_isolation_through_two_gateway_processes(two_gateways):
    http, urls, log_dir = two_gateways
    body = {"model": "small", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 7}

    async def one(i: int) -> tuple[int, dict, str | None]:
        async with http.post(urls[i % 2] + "/v1/chat/completions", json=body,
                             headers={"Authorization": "Bearer sk-burst"}) as response:
            return response.status, await response.json(), response.headers.get("Retry-After")

    results = await asyncio.gather(*(one(i) for i in range(500)))
    statuses = [r[0] for r in results]
    assert statuses.count(200) == 100 and statuses.count(429) == 400
    refused = [r for r in results if r[0] == 429]
    assert all(r[1]["error"]["code"] == "rate_limit_exceeded" and int(r[2]) >= 1 for r in refused)
    # each process got 250 requests, so per-process limits would admit 200: exactly 100 proves one
    # shared limit (how the 100 split between the processes is up to the OS scheduler)

    # /v1/usage (through the other gateway too) equals the usage logs of both processes; burst's
    # own call to it is a request too, past its limit now, so the admin key reads its report
    records = read_records(glob.glob(str(log_dir / "*.jsonl")))
    assert len(records) == 100 and len({r.tenant for r in records}) == 1
    async with openai.AsyncOpenAI(base_url=urls[1] + "/v1", api_key="sk-burst", max_retries=0) as burst:
        with pytest.raises(openai.RateLimitError):
            await burst.get("/usage", cast_to=object)
    async with openai.AsyncOpenAI(base_url=urls[1] + "/v1", api_key="sk-admin", max_retries=0) as admin:
        usage = next(r for r in (await admin.get("/usage", cast_to=object))["data"] if r["tenant"] == "burst")
    assert usage["tenant"] == "burst" and usage["month_spend_micro_usd"] == sum(r.cost_micro for r in records)
    assert usage["days"][0]["tiers"]["small"]["requests"] == 100
    assert len({os.path.basename(p) for p in glob.glob(str(log_dir / "*.jsonl"))}) == 2  # one log per replica

    async with openai.AsyncOpenAI(base_url=urls[0] + "/v1", api_key="sk-other", max_retries=0) as other:
        own = await other.get("/usage", cast_to=object)
        assert own["tenant"] == "other" and own["month_spend_micro_usd"] == 0 and own["days"] == []
        answer = await other.chat.completions.create(model="small", messages=body["messages"])
        assert answer.usage.completion_tokens > 0                       # burst's limit is not other's
    async with openai.AsyncOpenAI(base_url=urls[0] + "/v1", api_key="sk-admin", max_retries=0) as admin:
        everyone = await admin.get("/usage", cast_to=object)
    assert {r["tenant"] for r in everyone["data"]} == {"burst", "other"}
    async with openai.AsyncOpenAI(base_url=urls[0] + "/v1", api_key="sk-wrong", max_retries=0) as intruder:
        with pytest.raises(openai.AuthenticationError) as err:
            await intruder.chat.completions.create(model="small", messages=body["messages"])
        assert err.value.body["code"] == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            await intruder.get("/usage", cast_to=object)

    # the dry run shows the policy's steps (a request too: other's, whose pinned route is burst's)
    async with http.post(urls[0] + "/v1/route", json={**body, "model": "cheap"},
                         headers={"Authorization": "Bearer sk-other"}) as response:
        route = await response.json()
    assert route["tier"] == "small" and route["routed_by"] == "pinned"
    assert {"step": "pinned", "model": "cheap", "tier": "small"} in route["steps"]
