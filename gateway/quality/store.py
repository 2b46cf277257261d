"""Quality state in Redis, shared by every gateway replica. Keys (under `<prefix>quality:`; the
verdict script's under `quality:{monitor}:`, one Redis Cluster hash tag, so they share a slot):

- `samples`             capped stream (XADD MAXLEN ~) of scored samples
- `win:tier:<tier>`     list of the last N verdicts of a tier ("1" failed, "0" passed)
- `win:class:<level>`   list of the last N verdicts of requests the classifier put at that level
- `ctl`                 hash: `step:<tier>` (current adjustment) and `since:<tier>` (samples since the last change)
- `changes`             capped stream of adjustments with their reason

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
    return {"samples": prefix + "quality:samples", "ctl": base + "ctl", "changes": base + "changes",
            "tier": base + "win:tier:", "class": base + "win:class:"}


class QualityStore:
    def __init__(self, redis, prefix: str):
        self.redis = redis
        self.keys = keys(prefix)
        self._record = redis.register_script(_LUA)

    async def add_sample(self, fields: dict, maxlen: int) -> None:
        await self.redis.xadd(self.keys["samples"], {k: str(v) for k, v in fields.items()},
                              maxlen=maxlen, approximate=True)

    async def record(self, tier: str, predicted_level: int | None, failed: bool, q) -> Recorded:
        k = self.keys
        class_key = k["class"] + (str(predicted_level) if predicted_level else "none")
        out = await self._record(keys=[k["tier"] + tier, class_key, k["ctl"], k["changes"]],
                                 args=["1" if failed else "0", q.window, q.min_samples, q.trigger, q.recover,
                                       q.max_steps, tier, CHANGES_MAXLEN])
        return Recorded(*(int(x) for x in out))

    async def steps(self) -> dict[str, int]:
        raw = await self.redis.hgetall(self.keys["ctl"])
        out = {}
        for field, value in raw.items():
            field = field.decode() if isinstance(field, bytes) else field
            if field.startswith("step:"):
                out[field[5:]] = int(value)
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


def _decode(fields: dict) -> dict:
    return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in fields.items()}
