"""API-managed keys under `python -m benchmarks.gateway --tenants`: keys stored through the admin
API, how long a created key takes to serve on another replica and a revoked one to be refused
there (propagation, from the admin answer to the first answer of the other replica that shows
it), and what a flood of unknown keys costs Redis (commands per request, from Redis's own count)."""
from __future__ import annotations

import asyncio
import time

import aiohttp
import redis

from measure.stats import percentile

ADMIN_KEY = "sk-bench-admin"
PROBE_TENANT = "bench-keys"


def _auth(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


async def _admin(session: aiohttp.ClientSession, method: str, url: str, body: dict | None = None) -> dict:
    async with session.request(method, url, json=body, headers=_auth(ADMIN_KEY)) as answer:
        data = await answer.json()
        if answer.status != 200:
            raise RuntimeError(f"{method} {url}: {answer.status} {data}")
        return data


async def store_keys(session: aiohttp.ClientSession, url: str, count: int, concurrency: int = 16) -> float:
    """`count` keys created through the admin API (one tenant); the seconds it took."""
    await _admin(session, "POST", url + "/admin/tenants", {"name": PROBE_TENANT})
    started, left = time.monotonic(), iter(range(count))

    async def creator() -> None:
        for _ in left:
            await _admin(session, "POST", url + "/admin/keys", {"tenant": PROBE_TENANT})
    await asyncio.gather(*(creator() for _ in range(concurrency)))
    return time.monotonic() - started


async def _until(session: aiohttp.ClientSession, url: str, key: str, status: int, timeout_s: float = 10) -> float:
    """Seconds until `url`/v1/models answers `status` to `key` (asked back to back)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        async with session.get(url + "/v1/models", headers=_auth(key)) as answer:
            await answer.read()
            if answer.status == status:
                return time.monotonic() - started
    raise RuntimeError(f"{url}: no {status} within {timeout_s} s")


async def propagation(session: aiohttp.ClientSession, writer: str, reader: str, rounds: int) -> dict:
    """Create on `writer`, time until `reader` serves the key; revoke on `writer`, time until `reader` refuses it."""
    created, revoked = [], []
    for _ in range(rounds):
        key = await _admin(session, "POST", writer + "/admin/keys", {"tenant": PROBE_TENANT})
        created.append(await _until(session, reader, key["secret"], 200))
        await _admin(session, "POST", f"{writer}/admin/keys/{key['id']}/revoke")
        revoked.append(await _until(session, reader, key["secret"], 401))

    def summary(values: list[float]) -> dict:
        values.sort()
        return {"p50_ms": round(percentile(values, 50) * 1000, 3), "p99_ms": round(percentile(values, 99) * 1000, 3),
                "max_ms": round(values[-1] * 1000, 3)}
    return {"rounds": rounds, "create_to_usable": summary(created), "revoke_to_refused": summary(revoked)}


async def unknown_key_flood(session: aiohttp.ClientSession, url: str, redis_url: str, requests: int) -> dict:
    """Requests with unknown keys, back to back: Redis's command count over them, per request."""
    client = redis.Redis.from_url(redis_url)
    before = int(client.info("stats")["total_commands_processed"])
    started = time.monotonic()
    for i in range(requests):
        async with session.get(url + "/v1/models", headers=_auth(f"sk-tg-unknown-{i}")) as answer:
            await answer.read()
            assert answer.status == 401, answer.status
    seconds = time.monotonic() - started
    commands = int(client.info("stats")["total_commands_processed"]) - before
    client.close()
    # the version poll and other background reads run meanwhile: they are in the count, too
    return {"requests": requests, "seconds": round(seconds, 3), "redis_commands": commands,
            "redis_commands_per_request": round(commands / requests, 4)}
