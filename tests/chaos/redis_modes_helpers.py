"""In-process gateways on a Sentinel group or a Cluster: their config, a concurrent load that
records every answer, and the ledger held against the usage logs."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from prometheus_client import REGISTRY

from gateway.config.redis import redis_config
from gateway.server.redis_conn import connect
from policies.keys import hash_key
from policies.store import PolicyStore
from policies.usage_log import read_records
from tests.gateway.gw_helpers import base_config, tier

PROMPT_PAD = "x" * 200  # long enough for several affinity chunks: their MGET runs on the Cluster too
LOCAL_ADMITS = ("tiergate_policy_redis_unavailable_total", {"operation": "admit", "action": "local_limits"})


def key_of(tenant: str) -> str:
    return f"sk-{tenant}-redis-modes"


def redis_settings(topology, prefix: str, timeout_s: float = 0.5) -> dict:
    return {**topology.settings, "key_prefix": prefix, "socket_timeout_s": timeout_s, "retry_after_s": 0.3}


def gateway_doc(topology, upstream: str, prefix: str, usage_dir: Path, tenants: dict, on_redis_error: str,
                timeout_s: float = 0.5, **sections) -> dict:
    """tenants: name -> policy fields (each gets one key, `key_of(name)`)."""
    tenants = {name: {"keys": [{"id": "k", "sha256": hash_key(key_of(name))}], **spec}
               for name, spec in tenants.items()}
    doc = base_config([tier("small", 1, [upstream]), tier("large", 2, [upstream])], prefix, tenants=tenants,
                      policy={"usage_log": {"dir": str(usage_dir), "fsync": "always"},
                              "on_redis_error": on_redis_error},
                      affinity={"chunk_chars": 64}, **sections)
    doc["redis"] = redis_settings(topology, prefix, timeout_s)
    # bursts of 200 at once on a loaded machine: a slow upstream connection is not what these tests measure,
    # and a request refused after admission would count against a limit without a 200 to show for it
    doc["timeouts"] = {"connect_s": 10.0, "read_s": 30.0}
    return doc


def client_for(topology, prefix: str):
    """A client of our own (as a gateway connects) to read the ledger."""
    raw = redis_settings(topology, prefix)
    return connect(redis_config(raw))


@dataclass
class Load:
    """Requests through gateways, each answer recorded as (start, end, status, code)."""
    session: aiohttp.ClientSession
    urls: list[str]
    answers: list[tuple[float, float, int, str]] = field(default_factory=list)
    sent: int = 0

    async def one(self, tenant: str) -> tuple[int, str]:
        i, self.sent = self.sent, self.sent + 1
        start = time.monotonic()
        body = {"model": "small", "max_tokens": 4,
                "messages": [{"role": "user", "content": f"question {i} {PROMPT_PAD}"}]}
        async with self.session.post(self.urls[i % len(self.urls)] + "/v1/chat/completions", json=body,
                                     headers={"Authorization": f"Bearer {key_of(tenant)}"}) as response:
            payload = await response.json()
        code = "" if response.status == 200 else payload["error"]["code"]
        self.answers.append((start, time.monotonic(), response.status, code))
        return response.status, code

    async def burst(self, tenants: list[str], concurrency: int) -> list[tuple[int, str]]:
        """One request per entry of `tenants`, at most `concurrency` at once; their statuses."""
        gate = asyncio.Semaphore(concurrency)

        async def gated(tenant: str) -> tuple[int, str]:
            async with gate:
                return await self.one(tenant)
        return await asyncio.gather(*(gated(t) for t in tenants))

    async def steady(self, tenant: str, workers: int, stop: asyncio.Event) -> None:
        async def loop() -> None:
            while not stop.is_set():
                if (await self.one(tenant))[0] != 200:
                    await asyncio.sleep(0.1)  # a client honouring Retry-After, shortened: pacing, not a wait
        await asyncio.gather(*(loop() for _ in range(workers)))

    def between(self, start: float, end: float = float("inf")) -> list[tuple[float, float, int, str]]:
        return [a for a in self.answers if start <= a[0] and a[1] <= end]


class LocalAdmitWatch:
    """When the policy last admitted a request under local limits (Redis unreachable)."""

    def __init__(self):
        self.count = REGISTRY.get_sample_value(*LOCAL_ADMITS) or 0.0
        self.changed_at = 0.0

    def poll(self) -> float:
        count = REGISTRY.get_sample_value(*LOCAL_ADMITS) or 0.0
        if count != self.count:
            self.count, self.changed_at = count, time.monotonic()
        return self.changed_at


def log_paths(*dirs: Path) -> list[str]:
    return sorted(str(p) for d in dirs for p in d.glob("*.jsonl*"))


def log_spend(paths: list[str]) -> dict[str, int]:
    """Each tenant's spend in the usage logs (a request id logged twice counts once)."""
    seen, spend = set(), {}
    for r in read_records(paths):
        if (r.tenant, r.request_id) not in seen:
            seen.add((r.tenant, r.request_id))
            spend[r.tenant] = spend.get(r.tenant, 0) + r.cost_micro
    return spend


async def ledger_spend(store: PolicyStore, tenants, month: str) -> dict[str, int]:
    return {t: (await store.spend(t, "-", month))[1] for t in tenants}

