"""Verdicts on cascaded answers in Redis, per tenant, and each tenant's calibrated threshold.
Keys (under `<prefix>quality:cascade:`; a tenant's under its own hash tag, its hex-encoded name,
so every multi-key call stays in one slot):

- `{<hex name>}:verdicts`  capped list, newest first, of the tenant's verdicts (JSON, see CascadeVerdictRow)
- `{<hex name>}:count`     how many were ever recorded: the calibrator's cue that new ones came
- `{<hex name>}:live`      the threshold the guard last accepted for the tenant (JSON)
- `tenants`                set of the tenants with verdicts (one key, alone in its calls)

Only a tenant's own verdicts are read to calibrate its threshold (docs/routing.md, "The quality
monitor and tenants").
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..core.cascade import LiveThreshold


@dataclass(frozen=True)
class CascadeVerdictRow:
    confidence: float         # the first answer's
    cheap_good: bool          # the first tier's answer passed the monitor's check
    strong_good: bool | None  # the answer one tier up did; None: not judged (it was the reference)
    heldout: bool             # kept for the guard's replay, never fitted on
    target: float             # the tenant's quality target when it was judged
    static: float             # the tenant's policy threshold then: the start and fallback

    def encode(self) -> str:
        return json.dumps({"c": round(self.confidence, 6), "g": int(self.cheap_good),
                           "s": None if self.strong_good is None else int(self.strong_good),
                           "h": int(self.heldout), "t": self.target, "z": self.static}, separators=(",", ":"))

    @classmethod
    def decode(cls, raw) -> "CascadeVerdictRow":
        d = json.loads(raw)
        return cls(float(d["c"]), bool(d["g"]), None if d["s"] is None else bool(d["s"]), bool(d["h"]),
                   float(d["t"]), float(d["z"]))


class CascadeStore:
    def __init__(self, redis, prefix: str):
        self.redis = redis
        self.base = prefix + "quality:cascade:"

    def tenant_key(self, tenant: str, name: str) -> str:
        return f"{self.base}{{{tenant.encode().hex()}}}:{name}"

    async def add(self, tenant: str, row: CascadeVerdictRow, kept: int) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:  # one tenant's keys: one slot
            pipe.lpush(self.tenant_key(tenant, "verdicts"), row.encode())
            pipe.ltrim(self.tenant_key(tenant, "verdicts"), 0, kept - 1)
            pipe.incr(self.tenant_key(tenant, "count"))
            await pipe.execute()
        await self.redis.sadd(self.base + "tenants", tenant)

    async def tenants(self) -> list[str]:
        return sorted(_text(t) for t in await self.redis.smembers(self.base + "tenants"))

    async def counts_and_live(self, tenants: list[str]) -> dict[str, tuple[int, LiveThreshold | None]]:
        pipe = self.redis.pipeline(transaction=False)
        for tenant in tenants:
            pipe.get(self.tenant_key(tenant, "count"))
            pipe.get(self.tenant_key(tenant, "live"))
        raw = await pipe.execute()
        return {t: (int(raw[2 * i] or 0), _live(raw[2 * i + 1])) for i, t in enumerate(tenants)}

    async def verdicts(self, tenant: str) -> list[CascadeVerdictRow]:
        """Oldest first."""
        return [CascadeVerdictRow.decode(r) for r in reversed(await self.redis.lrange(
            self.tenant_key(tenant, "verdicts"), 0, -1))]

    async def set_live(self, tenant: str, live: LiveThreshold) -> None:
        await self.redis.set(self.tenant_key(tenant, "live"), json.dumps(
            {"threshold": live.threshold, "verdicts": live.verdicts, "at_ms": live.at_ms}))


def _live(raw) -> LiveThreshold | None:
    if raw is None:
        return None
    d = json.loads(raw)
    return LiveThreshold(float(d["threshold"]), int(d["verdicts"]), int(d["at_ms"]))


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value
