"""Tier climbs: requests served by a tier outside the tenant's allowed tiers (issue 44, part 3).

An in-process gateway with tenants on the shared Redis (a key prefix of its own, deleted after)
sits in front of fake upstreams on loopback: tiers small, medium and large, medium's only worker
down. A tenant allowed only `medium` sends `medium` and `auto` requests, whole and streamed;
every answer served by another tier, and every request a tier outside its policy received, is
a climb (expected 0). A tenant allowed `medium` and `large` sends the same to show that an
allowed escalation still happens. `python -m benchmarks.tenancy_climbs` prints one JSON line.
"""
from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import yaml

from launcher.fake_upstream import start_fake
from launcher.processes import SHARED_REDIS, delete_prefix, free_port
from policies.keys import hash_key

REQUESTS = 50
ALLOWED = {"medium-only": ["medium"], "wide": ["medium", "large"]}
KEYS = {name: f"sk-climbs-{name}-key" for name in ALLOWED}
MESSAGES = [{"role": "user", "content": "Name one prime number."}]


def _config(small: str, large: str, prefix: str, usage_dir: str) -> dict:
    def tier(name: str, level: int, url: str) -> dict:
        return {"name": name, "level": level, "model": f"model-{name}",
                "price_per_mtok": {"input": 1.0, "output": 2.0}, "workers": [{"url": url}]}

    tenants = {name: {"keys": [{"id": "k", "sha256": hash_key(KEYS[name])}], "allowed_tiers": tiers}
               for name, tiers in ALLOWED.items()}
    return {"tiers": [tier("small", 1, small), tier("medium", 2, f"http://127.0.0.1:{free_port()}"),
                      tier("large", 3, large)],
            "redis": {"url": SHARED_REDIS, "key_prefix": prefix},
            "health": {"interval_s": 0.2, "timeout_s": 0.5}, "timeouts": {"connect_s": 1.0, "read_s": 5.0},
            "tenants": tenants, "policy": {"usage_log": {"dir": usage_dir}}}


async def _ask(session: aiohttp.ClientSession, url: str, tenant: str, n: int) -> tuple[int, str | None]:
    """(status, the tier that served it) of one request; every other one streamed, half of them `auto`."""
    body = {"model": "auto" if n % 2 else "medium", "messages": MESSAGES, "max_tokens": 8, "stream": n % 4 >= 2}
    async with session.post(url + "/v1/chat/completions", json=body,
                            headers={"Authorization": f"Bearer {KEYS[tenant]}"}) as response:
        await response.read()
        return response.status, response.headers.get("x-tiergate-tier") if response.status == 200 else None


async def _run(workdir: Path) -> dict:
    from gateway.app import build_app, start_site
    from gateway.core.classify import PromptLengthClassifier
    from gateway.config import load_config
    from gateway.state import GatewayState

    (small, small_runner, small_url), (large, large_runner, large_url) = \
        [await start_fake(name=name) for name in ("small", "large")]
    prefix = f"tgbench-climbs:{uuid.uuid4().hex[:8]}:"
    path = workdir / "gateway.yaml"
    path.write_text(yaml.safe_dump(_config(small_url, large_url, prefix, str(workdir / "usage"))))
    state = GatewayState(load_config(path), str(path), classifier=PromptLengthClassifier())
    runner = await start_site(build_app(state), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    started = time.perf_counter()
    try:
        async with aiohttp.ClientSession() as session:
            fenced = [await _ask(session, url, "medium-only", n) for n in range(REQUESTS)]
            outside = len(small.seen) + len(large.seen)  # medium-only may use neither
            wide = [await _ask(session, url, "wide", n) for n in range(REQUESTS // 5)]
    finally:
        await runner.cleanup()
        await small_runner.cleanup()
        await large_runner.cleanup()
        delete_prefix(prefix)
    return {"requests": REQUESTS,
            "tier_climbs": sum(1 for status, tier in fenced if status == 200 and tier not in ALLOWED["medium-only"]),
            "requests_to_tiers_outside_policy": outside,
            "refused_503": sum(1 for status, _ in fenced if status == 503),
            "allowed_escalation_requests": len(wide),
            "allowed_escalations_served": sum(1 for status, tier in wide if status == 200 and tier == "large"),
            "seconds": round(time.perf_counter() - started, 2)}


def measure() -> dict:
    with tempfile.TemporaryDirectory(prefix="tiergate-climbs-") as workdir:
        return asyncio.run(_run(Path(workdir)))


if __name__ == "__main__":
    print(json.dumps(measure()))
