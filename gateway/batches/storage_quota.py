"""Per-tenant storage quotas (files, stored responses) kept atomically in Redis.

Each kind of stored item has, per tenant, a sorted set (item id -> expiry, unix seconds), a hash
of item sizes and a byte total, all under the tenant's hash tag so one script touches one slot.
Expired items are dropped by the next call, so quota comes back on expiry without a sweeper, and
the caller gets their ids to remove whatever they name (file bodies on disk).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from wire.errors import OpenAIError

KEPT, OVER_BYTES, OVER_COUNT = 0, 1, 2

# The first write of a kept item is ZADD, which Redis refuses whole when it is out of memory
# (noeviction): the script then changes nothing and the caller answers 503.
_RESERVE = """
local now, size = tonumber(ARGV[4]), tonumber(ARGV[2])
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
local freed = 0
for _, id in ipairs(expired) do freed = freed + tonumber(redis.call('HGET', KEYS[2], id) or '0') end
local count = redis.call('ZCARD', KEYS[1]) - #expired
local used = math.max(0, tonumber(redis.call('GET', KEYS[3]) or '0') - freed)
local score, previous = redis.call('ZSCORE', KEYS[1], ARGV[1]), 0
if score and tonumber(score) > now then
  previous = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
else
  count = count + 1
end
local status = 0
if count > tonumber(ARGV[5]) then status = 2
elseif used - previous + size > tonumber(ARGV[6]) then status = 1 end
if status == 0 and ARGV[8] ~= '1' then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], size)
  used = used - previous + size
end
for _, id in ipairs(expired) do
  if id ~= ARGV[1] or status ~= 0 or ARGV[8] == '1' then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
  end
end
if #expired > 0 or (status == 0 and ARGV[8] ~= '1') then
  redis.call('SET', KEYS[3], used)
  for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[7]) end
end
return {status, count, used, unpack(expired)}
"""
_RELEASE = """
local size = redis.call('HGET', KEYS[2], ARGV[1])
if not size then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], math.max(0, tonumber(redis.call('GET', KEYS[3]) or '0') - tonumber(size)), 'KEEPTTL')
return 1
"""


@dataclass(frozen=True)
class Quota:
    """One tenant's limits for one kind of item, and the config fields that set them."""
    count: int
    bytes: int
    count_field: str
    bytes_field: str


@dataclass(frozen=True)
class Reserved:
    used: int             # the tenant's bytes of this kind, the new item included
    expired: list[str]    # items that expired since the last call, now given back


class StorageQuota:
    def __init__(self, redis, prefix: str, kind: str, noun: str, ttl_s: int):
        self.prefix, self.kind, self.noun, self.ttl_s = prefix, kind, noun, ttl_s
        self._reserve = redis.register_script(_RESERVE)
        self._release = redis.register_script(_RELEASE)

    def keys(self, tenant: str) -> list[str]:
        base = f"{self.prefix}storage:{{{tenant}}}:{self.kind}"
        return [base, base + ":sizes", base + ":bytes"]

    async def reserve(self, tenant: str, item_id: str, size: int, expires_at: int, quota: Quota, *,
                      check_only: bool = False) -> Reserved:
        """Count the item at `size` (an item counted already: its new size), or with `check_only`
        only see that it would fit; a 429 past the count quota, a 413 past the byte quota. Nothing
        passes the quota, batch results and stored responses included."""
        status, count, used, *expired = await self._reserve(
            keys=self.keys(tenant),
            args=[item_id, size, expires_at, int(time.time()), quota.count, quota.bytes, self.ttl_s,
                  int(check_only)])
        if status == OVER_COUNT:
            raise OpenAIError(429, f"tenant {tenant!r} keeps {count - 1} {self.noun}, its quota "
                                   f"({quota.count_field}: {quota.count}); delete some or wait for them to expire",
                              code="storage_quota_exceeded")
        if status == OVER_BYTES:
            raise OpenAIError(413, f"tenant {tenant!r} keeps {used} bytes of {self.noun}; {size} more would pass "
                                   f"its quota ({quota.bytes_field}: {quota.bytes})", code="storage_quota_exceeded")
        return Reserved(used, [i.decode() if isinstance(i, bytes) else i for i in expired])

    async def room(self, tenant: str, quota: Quota) -> int:
        """Bytes the tenant may still store; the quota's refusal when not one more item fits."""
        return quota.bytes - (await self.reserve(tenant, "", 1, 0, quota, check_only=True)).used

    async def release(self, tenant: str, item_id: str) -> None:
        await self._release(keys=self.keys(tenant), args=[item_id])


def _limits(config, tenant):
    """The tenant's `storage:` quotas; a tenant without a policy (no `tenants:`) has the defaults."""
    policy = getattr(tenant, "policy", None) or config.policies.defaults
    return policy.storage


def files_quota(config, tenant) -> Quota:
    limits = _limits(config, tenant)
    return Quota(limits.files, limits.files_bytes, "storage.files", "storage.files_bytes")


def responses_quota(config, tenant) -> Quota:
    limits = _limits(config, tenant)
    return Quota(limits.stored_responses, limits.stored_responses_bytes, "storage.stored_responses",
                 "storage.stored_responses_bytes")
