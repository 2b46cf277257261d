"""Budget alerts in Redis, every key under the one hash tag `{alerts}` (alerts are few; one slot
lets each script take them together on a Cluster):
- `fired:<id>`: the marker that makes an alert once per (tenant or key, budget, period, threshold)
- `records`: id -> the alert and its delivery status (JSON), the newest 10,000 kept
- `due`: deliveries to make, scored by when (a claimed one by the end of its lease)
- `index`: ids by creation time, for /admin/alerts and the cap"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from policies.alerts.thresholds import Crossing
from policies.atomic import Atomic

_LUA = Path(__file__).resolve().parents[1] / "lua"
KEPT = 10_000
MARKER_TTL_S = {"daily": 2 * 86400, "weekly": 9 * 86400, "monthly": 62 * 86400}  # past its period, the marker has done its job


@dataclass(frozen=True)
class AlertKeys:
    prefix: str

    def _base(self) -> str:
        return f"{self.prefix}alerts:{{alerts}}"

    def fired(self, alert_id: str) -> str:
        return f"{self._base()}:fired:{alert_id}"

    def records(self) -> str:
        return f"{self._base()}:records"

    def due(self) -> str:
        return f"{self._base()}:due"

    def index(self) -> str:
        return f"{self._base()}:index"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class AlertStore:
    def __init__(self, redis: Any, prefix: str):
        self.redis = redis
        self.keys = AlertKeys(prefix)
        self._fire = redis.register_script((_LUA / "alert_fire.lua").read_text())
        self._claim = redis.register_script((_LUA / "alert_claim.lua").read_text())

    async def fire(self, crossing: Crossing, created_at: float, deliver: bool) -> bool:
        """True when this call created the alert (it happens once across replicas)."""
        k = self.keys
        record = {"id": crossing.id, **asdict(crossing), "created_at": round(created_at, 3),
                  "status": "pending" if deliver else "not_sent", "attempts": 0, "last_error": None,
                  "delivered_at": None}
        created = await self._fire(keys=[k.fired(crossing.id), k.records(), k.due(), k.index()],
                                   args=[crossing.id, json.dumps(record), MARKER_TTL_S[crossing.budget],
                                         1 if deliver else 0, KEPT])
        return int(created) == 1

    async def claim(self, lease_ms: int, most: int = 10) -> list[dict]:
        reply = await self._claim(keys=[self.keys.due(), self.keys.records()], args=[lease_ms, most])
        return [json.loads(reply[i + 1]) for i in range(0, len(reply), 2)]

    async def record(self, alert: dict, retry_at_ms: int | None) -> None:
        """Store the delivery's outcome; `retry_at_ms`: when to try again, None: no more tries."""
        atomic = Atomic(self.redis).call("HSET", self.keys.records(), alert["id"], json.dumps(alert))
        if retry_at_ms is None:
            atomic.call("ZREM", self.keys.due(), alert["id"])
        else:
            atomic.call("ZADD", self.keys.due(), retry_at_ms, alert["id"])
        await atomic.run()

    async def page(self, limit: int, before: str | None) -> list[dict]:
        """Newest first; `before`: an alert id, the page starts after it."""
        top = "+inf"
        if before:
            score = await self.redis.zscore(self.keys.index(), before)
            if score is None:
                return []
            top = f"({int(score)}"
        ids = await self.redis.zrevrangebyscore(self.keys.index(), top, "-inf", start=0, num=limit)
        if not ids:
            return []
        raw = await self.redis.hmget(self.keys.records(), [_text(i) for i in ids])
        return [json.loads(r) for r in raw if r is not None]
