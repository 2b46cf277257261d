"""`max_concurrent_requests`: requests (and streams) a tenant, and each of its keys, may have
open at once across every gateway replica.

Each open request holds a slot: a member of a sorted set per tenant and per key, scored by
when it lapses. A live request pushes that forward every third of the lease (renewal.py), so
a stream may run for hours; a replica that died stops renewing and its slots lapse one lease
later. While Redis is away, each replica counts its own open requests against the same limits.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

from wire.errors import OpenAIError

LEASE_S = 30.0

# 0: taken; i > 0: KEYS[i] is full. Expired slots go first, so a crashed replica's free up.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  local limit = tonumber(ARGV[2 + i])
  if limit > 0 and redis.call('ZCARD', KEYS[i]) >= limit then return i end
end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 0
"""
_RENEW = """
local t = redis.call('TIME')
local until_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], 'XX', until_ms, ARGV[i + 1])
  redis.call('PEXPIRE', KEYS[i], ARGV[1])
end
return 0
"""
_GIVE_BACK = """
for i = 1, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
return 0
"""


@dataclass(frozen=True)
class Slot:
    """One open request's place; `tenant` for the renewals, `keys` the sets it is counted in."""
    tenant: object
    member: str
    keys: tuple[str, ...]
    local: bool = False  # counted by this replica alone (Redis was away when it was taken)


class ConcurrencyLimits:
    def __init__(self, redis, prefix: str):
        self.prefix = prefix
        self._take = redis.register_script(_TAKE) if redis is not None else None
        self._renew = redis.register_script(_RENEW) if redis is not None else None
        self._give_back = redis.register_script(_GIVE_BACK) if redis is not None else None
        self.open_here: Counter[str] = Counter()

    def keys(self, tenant: str, key_id: str | None) -> tuple[str, str]:
        base = f"{self.prefix}policy:{{{tenant}}}:open"
        return base, f"{base}:key:{key_id or '-'}"

    @staticmethod
    def limits(tenant, key_limits) -> tuple[int, int]:
        return tenant.policy.rate_limits.max_concurrent_requests or 0, key_limits.max_concurrent_requests or 0

    async def take(self, tenant, key_limits) -> Slot:
        """A slot, or the 429 that names the limit that is full."""
        keys, limits = self.keys(tenant.name, tenant.key_id), self.limits(tenant, key_limits)
        member = os.urandom(8).hex()
        full = int(await self._take(keys=list(keys), args=[member, int(LEASE_S * 1000), *limits]))
        if full:
            raise self.refusal(tenant, full, limits[full - 1])
        return Slot(tenant, member, keys)

    def take_here(self, tenant, key_limits) -> Slot:
        """Redis away: this replica's own open requests against the same limits."""
        keys, limits = self.keys(tenant.name, tenant.key_id), self.limits(tenant, key_limits)
        for i, (key, limit) in enumerate(zip(keys, limits), start=1):
            if limit and self.open_here[key] >= limit:
                raise self.refusal(tenant, i, limit)
        self.open_here.update(keys)
        return Slot(tenant, "", keys, local=True)

    async def renew(self, slots: list[Slot]) -> None:
        for slot in slots:
            await self._renew(keys=list(slot.keys), args=[int(LEASE_S * 1000), *[slot.member] * len(slot.keys)])

    async def give_back(self, slot: Slot) -> None:
        if slot.local:
            self.open_here.subtract(slot.keys)
            return
        await self._give_back(keys=list(slot.keys), args=[slot.member])

    @staticmethod
    def refusal(tenant, which: int, limit: int) -> OpenAIError:
        whose = f"tenant {tenant.name!r}" if which == 1 else f"key {tenant.key_id!r} of tenant {tenant.name!r}"
        field = "rate_limits.max_concurrent_requests" if which == 1 else "keys[].rate_limits.max_concurrent_requests"
        return OpenAIError(429, f"{whose} has {limit} requests open, its limit ({field}: {limit}); retry when "
                                "one ends", code="rate_limit_exceeded", headers={"Retry-After": "1"})
