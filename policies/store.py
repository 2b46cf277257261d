"""The Redis side of policies: each operation is one Lua script or plain reads, never read-modify-write."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from policies.atomic import Atomic
from policies.call_frames import Frames, key_budgets_of, limits_of  # noqa: F401 (imported from here too)
from policies.config import Tenant
from policies.keyspace import DAY_TTL_S, MONTH_TTL_S, WEEK_TTL_S, KeySpace
from policies.periods import Periods
from policies.usage_log import UsageRecord, record_periods

_LUA = Path(__file__).with_name("lua")
ADMITTED, RATE_LIMITED, OVER_BUDGET = 0, 1, 2
_TTL_S = {"daily": DAY_TTL_S, "weekly": WEEK_TTL_S, "monthly": MONTH_TTL_S}


@dataclass(frozen=True)
class Spend:
    """Settled spend of one owner (a tenant, or one key) in the current periods, micro-USD."""
    daily: int = 0
    weekly: int = 0
    monthly: int = 0

    def of(self, period: str) -> int:
        return getattr(self, period)


@dataclass(frozen=True)
class AdmitResult:
    status: int
    retry_after_ms: int
    day_spend_micro: int
    month_spend_micro: int
    what: str   # which limit refused: tenant_requests_per_minute, daily, key_weekly, ...
    week_spend_micro: int = 0
    key_spend: Spend = Spend()  # the authenticating key's own

    @property
    def tenant_spend(self) -> Spend:
        return Spend(self.day_spend_micro, self.week_spend_micro, self.month_spend_micro)


@dataclass(frozen=True)
class Settled:
    counted: bool  # by the call carrying this token
    tenant: Spend
    key: Spend


@dataclass(frozen=True)
class Reservation:
    """What admission holds against the hard budgets until settlement (or expiry) releases it."""
    id: str          # the server's request id
    cost_micro: int  # the request's worst case: prompt + n x max_tokens at its dearest reachable tier
    ttl_ms: int      # a gateway that crashed before settling stops holding it after this


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _by_name(fields: dict) -> dict[str, dict[str, int]]:
    """`<name>:<metric>` fields -> {name: {metric: value}} (a tier's or a tag's figures of a day)."""
    out: dict[str, dict[str, int]] = {}
    for field, value in fields.items():
        name, _, metric = _text(field).rpartition(":")
        out.setdefault(name, {})[metric] = int(value)
    return out


def holds_budget(tenant: Tenant) -> bool:
    """Admission reserves a worst case: a hard budget of the tenant or of its key applies."""
    return tenant.policy.budgets.hard or key_budgets_of(tenant).hard


def _spend(values: Any) -> Spend:
    return Spend(*(int(v or 0) for v in values))


class PolicyStore:
    def __init__(self, redis: Redis, prefix: str, idempotency_ttl_s: int, call_timeout_s: float = 50.0):
        """`call_timeout_s`: the deadline of one Redis call, every resend redis-py makes within it."""
        self.redis = redis
        self.keys = KeySpace(prefix)
        self.frames = Frames(self.keys)
        self.idempotency_ttl_s = idempotency_ttl_s
        # an admission's mark outlives the resends of its call; 10 s for one still queued in Redis
        self.admitted_mark_ms = int((call_timeout_s + 10) * 1000)
        self._admit = redis.register_script((_LUA / "admit.lua").read_text())
        self._settle = redis.register_script((_LUA / "settle.lua").read_text())
        self._renew = redis.register_script((_LUA / "renew.lua").read_text())

    async def admit(self, tenant: Tenant, member: str, charge_tokens: int, periods: Periods,
                    reservation: Reservation | None = None) -> AdmitResult:
        """Check and charge the limits; with a `reservation`, also hold its cost against the hard
        budgets (the tenant's and its key's, in the same call)."""
        frame = self.frames.of(tenant, periods)
        held = reservation if reservation is not None and frame.holds else None
        keys = [*frame.admit_keys, self.keys.admitted(tenant.name, member), *frame.admit_tail]
        args = [member, charge_tokens, *frame.admit_limits, held.id if held else "",
                reservation.cost_micro if reservation else 0, held.ttl_ms if held else 0, self.admitted_mark_ms,
                *frame.admit_args_tail]
        reply = await self._admit(keys=keys, args=args)
        return AdmitResult(int(reply[0]), int(reply[1]), int(reply[2]), int(reply[3]), _text(reply[4]),
                           int(reply[5]), _spend(reply[6:9]))

    async def settle(self, tenant: Tenant, record: UsageRecord, charged_tokens: int,
                     token: str, reservation_id: str = "") -> Settled:
        """Count `record` once and release the admission's reservation; returns whether the call
        carrying `token` counted it and the spend of the tenant and of its key after it. A record of
        0 tokens books nothing."""
        frame = self.frames.of(tenant, record_periods(record))
        correction = record.prompt_tokens + record.completion_tokens - charged_tokens
        reply = await self._settle(
            keys=[self.keys.settled(tenant.name, record.request_id), *frame.settle_keys],
            args=[self.idempotency_ttl_s, record.cost_micro, record.tier, record.prompt_tokens,
                  record.completion_tokens, correction, *frame.settle_limits, token, reservation_id,
                  ",".join(record.tags), *frame.settle_tail])
        counted = int(reply[0]) == 1 or _text(reply[3]) == token
        return Settled(counted, _spend((reply[1], reply[4], reply[2])), _spend(reply[5:8]))

    async def renew(self, tenant: str, key_id: str | None, reservation_ids: list[str], ttl_ms: int) -> int:
        """Push the expiry of the reservations still held (the tenant's, and with `key_id` that key's
        own) to `ttl_ms` from now; how many."""
        k = self.keys
        keys = [k.reservations(tenant), k.reserved_amounts(tenant)]
        if key_id:
            keys += [k.reservations(tenant, key_id), k.reserved_amounts(tenant, key_id)]
        return int(await self._renew(keys=keys, args=[ttl_ms, *reservation_ids]))

    async def spend(self, tenant: str, day: str, month: str) -> tuple[int, int]:
        values = await self.redis.mget([self.keys.spend_day(tenant, day), self.keys.spend_month(tenant, month)])
        return int(values[0] or 0), int(values[1] or 0)

    async def spend_of(self, tenant: str, periods: Periods, key_id: str | None = None) -> Spend:
        """The tenant's (or with `key_id`, that key's own) settled spend of the current periods."""
        return _spend(await self.redis.mget(self.keys.spend(tenant, periods, key_id)))

    async def usage(self, tenant: str, days: list[str], month: str, by_tag: bool = False) -> dict:
        """Spend, tokens and requests per tier (and with `by_tag`, per tag) and day, plus the
        month's spend (one pipeline of reads)."""
        pipe = self.redis.pipeline(transaction=False)
        for day in days:
            pipe.get(self.keys.spend_day(tenant, day))
            pipe.hgetall(self.keys.usage_day(tenant, day))
            if by_tag:
                pipe.hgetall(self.keys.usage_tags_day(tenant, day))
        pipe.get(self.keys.spend_month(tenant, month))
        replies = await pipe.execute()
        stride, out_days = 3 if by_tag else 2, []
        for i, day in enumerate(days):
            spend, tiers = replies[stride * i], _by_name(replies[stride * i + 1])
            if spend is not None or tiers:
                out_days.append({"date": day, "spend_micro_usd": int(spend or 0), "tiers": tiers,
                                 **({"tags": _by_name(replies[stride * i + 2])} if by_tag else {})})
        return {"tenant": tenant, "month": month, "month_spend_micro_usd": int(replies[-1] or 0), "days": out_days}

    async def replace_ledger(self, tenant: str, day: str | None, month: str | None,
                             spend_micro: int, usage: dict[str, int] | None = None,
                             tags: dict[str, int] | None = None) -> None:
        """Overwrite one day's (or one month's) ledger with recomputed totals, atomically."""
        atomic = Atomic(self.redis)
        if day is not None:
            atomic.call("SET", self.keys.spend_day(tenant, day), spend_micro, "EX", DAY_TTL_S)
            for key, figures in ((self.keys.usage_day(tenant, day), usage),
                                 (self.keys.usage_tags_day(tenant, day), tags)):
                atomic.call("DEL", key)
                if figures:
                    atomic.hset(key, figures)
                    atomic.call("EXPIRE", key, DAY_TTL_S)
        if month is not None:
            atomic.call("SET", self.keys.spend_month(tenant, month), spend_micro, "EX", MONTH_TTL_S)
        await atomic.run()

    async def replace_spend(self, tenant: str, key_id: str | None, period: str, label: str, spend_micro: int) -> None:
        """Overwrite one period's spend of the tenant (or of one key's own) with a recomputed total."""
        await self.redis.set(self.keys.spend_of(tenant, period, label, key_id), spend_micro, ex=_TTL_S[period])
