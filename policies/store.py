"""The Redis side of policies: each operation is one Lua script or plain reads, never read-modify-write."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from policies.atomic import Atomic
from policies.config import RateLimits, Tenant
from policies.keyspace import DAY_TTL_S, MONTH_TTL_S, KeySpace
from policies.usage_log import UsageRecord

_LUA = Path(__file__).with_name("lua")
ADMITTED, RATE_LIMITED, OVER_BUDGET = 0, 1, 2


@dataclass(frozen=True)
class AdmitResult:
    status: int
    retry_after_ms: int
    day_spend_micro: int
    month_spend_micro: int
    what: str   # which limit refused: tenant_requests_per_minute, daily, ...


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


def limits_of(tenant: Tenant) -> tuple[RateLimits, RateLimits]:
    key_limits = next((k.rate_limits for k in tenant.keys if k.id == tenant.key_id), RateLimits())
    return tenant.policy.rate_limits, key_limits


class PolicyStore:
    def __init__(self, redis: Redis, prefix: str, idempotency_ttl_s: int, call_timeout_s: float = 50.0):
        """`call_timeout_s`: the deadline of one Redis call, every resend redis-py makes within it."""
        self.redis = redis
        self.keys = KeySpace(prefix)
        self.idempotency_ttl_s = idempotency_ttl_s
        # an admission's mark outlives the resends of its call; 10 s for one still queued in Redis
        self.admitted_mark_ms = int((call_timeout_s + 10) * 1000)
        self._admit = redis.register_script((_LUA / "admit.lua").read_text())
        self._settle = redis.register_script((_LUA / "settle.lua").read_text())
        self._renew = redis.register_script((_LUA / "renew.lua").read_text())

    async def admit(self, tenant: Tenant, member: str, charge_tokens: int, day: str, month: str,
                    reservation: Reservation | None = None) -> AdmitResult:
        """Check and charge the limits; with a `reservation`, also hold its cost against the hard budgets."""
        k, name = self.keys, tenant.name
        own, per_key = limits_of(tenant)
        budgets = tenant.policy.budgets
        key_id = tenant.key_id or "-"
        held = reservation if reservation is not None and budgets.hard else None
        reply = await self._admit(
            keys=[k.requests_window(name), k.token_bucket(name), k.requests_window(name, key_id),
                  k.token_bucket(name, key_id), k.spend_day(name, day), k.spend_month(name, month),
                  k.reservations(name), k.reserved_amounts(name), k.admitted(name, member)],
            args=[member, charge_tokens, own.requests_per_minute or 0, own.tokens_per_minute or 0,
                  per_key.requests_per_minute or 0, per_key.tokens_per_minute or 0,
                  -1 if budgets.daily_hard is None else budgets.daily_hard,
                  -1 if budgets.monthly_hard is None else budgets.monthly_hard,
                  held.id if held else "", reservation.cost_micro if reservation else 0,
                  held.ttl_ms if held else 0, self.admitted_mark_ms])
        return AdmitResult(int(reply[0]), int(reply[1]), int(reply[2]), int(reply[3]), _text(reply[4]))

    async def settle(self, tenant: Tenant, record: UsageRecord, charged_tokens: int,
                     token: str, reservation_id: str = "") -> tuple[bool, int, int]:
        """Count `record` once and release the admission's reservation; returns (counted by the
        call carrying `token`, day spend, month spend). A record of 0 tokens books nothing."""
        k, name = self.keys, tenant.name
        own, per_key = limits_of(tenant)
        correction = record.prompt_tokens + record.completion_tokens - charged_tokens
        reply = await self._settle(
            keys=[k.settled(name, record.request_id), k.spend_day(name, record.day),
                  k.spend_month(name, record.month), k.usage_day(name, record.day),
                  k.token_bucket(name), k.token_bucket(name, tenant.key_id or "-"),
                  k.reservations(name), k.reserved_amounts(name), k.usage_tags_day(name, record.day)],
            args=[self.idempotency_ttl_s, record.cost_micro, record.tier, record.prompt_tokens,
                  record.completion_tokens, correction, own.tokens_per_minute or 0,
                  per_key.tokens_per_minute or 0, DAY_TTL_S, MONTH_TTL_S, token, reservation_id,
                  ",".join(record.tags)])
        return int(reply[0]) == 1 or _text(reply[3]) == token, int(reply[1]), int(reply[2])

    async def renew(self, tenant: str, reservation_ids: list[str], ttl_ms: int) -> int:
        """Push the expiry of the tenant's reservations still held to `ttl_ms` from now; how many."""
        return int(await self._renew(keys=[self.keys.reservations(tenant), self.keys.reserved_amounts(tenant)],
                                     args=[ttl_ms, *reservation_ids]))

    async def spend(self, tenant: str, day: str, month: str) -> tuple[int, int]:
        values = await self.redis.mget([self.keys.spend_day(tenant, day), self.keys.spend_month(tenant, month)])
        return int(values[0] or 0), int(values[1] or 0)

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
