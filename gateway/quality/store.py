"""Quality state in Redis, shared by every gateway replica. Keys (under `<prefix>quality:`; the
verdict script's under `quality:{monitor}:`, one Redis Cluster hash tag, so they share a slot):

- `samples`             capped stream (XADD MAXLEN ~) of scored samples
- `win:tier:<tier>`     list of the last N verdicts of a tier ("1" failed, "0" passed), every tenant's: shown only
- `win:class:<level>`   list of the last N verdicts of requests the classifier put at that level
- `tenant:<hex name>:win:tier:<tier>`  the same for one tenant's requests: what its adjustment follows
- `tenant:<hex name>:ctl`  hash: `step:<tier>` (the tenant's adjustment) and `since:<tier>` (samples since its last change)
- `tenants`             set of the tenants with an adjustment hash
- `changes`             capped stream of adjustments with their tenant and reason

Each tenant's verdicts move only its own adjustment (docs/routing.md, "The quality monitor
and tenants"): one tenant's traffic cannot move another's routing.

Recording a verdict and deciding the adjustment is one Lua script, so replicas never race.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

_LUA = (Path(__file__).parent / "lua" / "record_verdict.lua").read_text()
CHANGES_MAXLEN = 1000


@dataclass(frozen=True)
class Recorded:
    window_failures: int
    window_size: int
    step: int
    changed: int  # +1 raised, -1 relaxed, 0 unchanged

    @property
    def failure_rate(self) -> float:
        return self.window_failures / self.window_size if self.window_size else 0.0


def keys(prefix: str) -> dict[str, str]:
    base = prefix + "quality:{monitor}:"  # the verdict script's keys: one hash tag
    return {"samples": prefix + "quality:samples", "changes": base + "changes", "tenants": base + "tenants",
            "tier": base + "win:tier:", "class": base + "win:class:", "tenant": base + "tenant:"}


def tenant_keys(keys_: dict[str, str], tenant: str) -> tuple[str, str]:
    """(its controller hash, the prefix of its tier windows); the name hex-encoded: any name is one key."""
    base = keys_["tenant"] + tenant.encode().hex()
    return base + ":ctl", base + ":win:tier:"


class QualityStore:
    def __init__(self, redis, prefix: str):
        self.redis = redis
        self.keys = keys(prefix)
        self._record = redis.register_script(_LUA)

    async def add_sample(self, fields: dict, maxlen: int) -> None:
        await self.redis.xadd(self.keys["samples"], {k: str(v) for k, v in fields.items()},
                              maxlen=maxlen, approximate=True)

    async def record(self, tenant: str, tier: str, predicted_level: int | None, failed: bool, q) -> Recorded:
        k = self.keys
        ctl, windows = tenant_keys(k, tenant)
        class_key = k["class"] + (str(predicted_level) if predicted_level else "none")
        out = await self._record(keys=[windows + tier, class_key, ctl, k["changes"], k["tier"] + tier, k["tenants"]],
                                 args=["1" if failed else "0", q.window, q.min_samples, q.trigger, q.recover,
                                       q.max_steps, tier, CHANGES_MAXLEN, tenant])
        return Recorded(*(int(x) for x in out))

    async def steps(self) -> dict[str, dict[str, int]]:
        """Each tenant's adjustment steps by tier."""
        tenants = sorted(_text(t) for t in await self.redis.smembers(self.keys["tenants"]))
        pipe = self.redis.pipeline(transaction=False)
        for tenant in tenants:
            pipe.hgetall(tenant_keys(self.keys, tenant)[0])
        out = {}
        for tenant, raw in zip(tenants, await pipe.execute()):
            out[tenant] = {_text(f)[5:]: int(v) for f, v in raw.items() if _text(f).startswith("step:")}
        return out

    async def window(self, key: str) -> tuple[int, int]:
        values = await self.redis.lrange(key, 0, -1)
        return sum(v in (b"1", "1") for v in values), len(values)

    async def recent_samples(self, count: int) -> list[dict]:
        entries = await self.redis.xrevrange(self.keys["samples"], count=count)
        return [_decode(fields) for _, fields in entries]

    async def recent_changes(self, count: int) -> list[dict]:
        entries = await self.redis.xrevrange(self.keys["changes"], count=count)
        out = []
        for entry_id, fields in entries:
            row = _decode(fields)
            entry_id = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
            row["at_ms"] = int(entry_id.split("-")[0])
            out.append(row)
        return out


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _decode(fields: dict) -> dict:
    return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in fields.items()}
