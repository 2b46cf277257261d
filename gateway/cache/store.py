"""The exact cache's entries in Redis, one cache per scope (a tenant, or a group of tenants that
share one), bounded in bytes with least-recently-used eviction and a TTL per entry.

Every key of a scope carries the scope as its Cluster hash tag, so each script touches one slot:
the entries (`...:e:<key>`, each with its own expiry) and four indexes: `lru` (key -> last use,
ms), `exp` (key -> expiry, ms), `sizes` (key -> bytes) and `tiers` (key -> the tier it came
from, for invalidating one tier), with the scope's byte total in `bytes`. An entry that expired
leaves its indexes to the next write (or the read that misses it), so the byte total comes back
without a sweeper; a write first drops expired entries, then evicts the least recently used
until the new entry fits its quota.
"""
from __future__ import annotations

import time

# Drop one entry and its index rows; returns its size. KEYS: lru, exp, sizes, tiers.
_DROP = """
local function drop(id, prefix)
  local size = tonumber(redis.call('HGET', KEYS[3], id) or '0')
  redis.call('DEL', prefix .. id)
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  redis.call('HDEL', KEYS[4], id)
  return size
end
"""

# KEYS: lru, exp, sizes, tiers, bytes, entry. ARGV: id, now ms, entry prefix.
_GET = _DROP + """
local value = redis.call('GET', KEYS[6])
if value then
  redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[1])
  return value
end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then
  local size = drop(ARGV[1], ARGV[3])
  redis.call('SET', KEYS[5], math.max(0, tonumber(redis.call('GET', KEYS[5]) or '0') - size), 'KEEPTTL')
end
return false
"""

# KEYS: lru, exp, sizes, tiers, bytes, entry. ARGV: id, value, ttl ms, now ms, quota, tier, entry prefix.
# Returns {stored (1) or too large (0), bytes used, entries evicted}.
_PUT = _DROP + """
local now, ttl, quota, size = tonumber(ARGV[4]), tonumber(ARGV[3]), tonumber(ARGV[5]), #ARGV[2]
local used = tonumber(redis.call('GET', KEYS[5]) or '0')
if size > quota then return {0, used, 0} end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 256)) do
  used = used - drop(id, ARGV[7])
end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then used = used - drop(ARGV[1], ARGV[7]) end
local evicted = 0
while used + size > quota do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #oldest == 0 then used = 0 break end
  used = used - drop(oldest[1], ARGV[7])
  evicted = evicted + 1
end
redis.call('SET', KEYS[6], ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], size)
redis.call('HSET', KEYS[4], ARGV[1], ARGV[6])
used = math.max(0, used) + size
redis.call('SET', KEYS[5], used)
for i = 1, 5 do
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return {1, used, evicted}
"""

# KEYS: lru, exp, sizes, tiers, bytes. ARGV: entry prefix, tier ('' = every tier), ids...
# Returns how many entries went.
_CLEAR = _DROP + """
local freed, count = 0, 0
for i = 3, #ARGV do
  local tier = redis.call('HGET', KEYS[4], ARGV[i])
  if tier and (ARGV[2] == '' or tier == ARGV[2]) then
    freed = freed + drop(ARGV[i], ARGV[1])
    count = count + 1
  end
end
if count > 0 then
  redis.call('SET', KEYS[5], math.max(0, tonumber(redis.call('GET', KEYS[5]) or '0') - freed), 'KEEPTTL')
end
return count
"""

CLEAR_BATCH = 500  # entries per script call when clearing: Redis serves others between calls


def scope_keys(prefix: str, scope: str) -> tuple[str, list[str]]:
    """The entry prefix and the index keys (lru, exp, sizes, tiers, bytes) of one scope."""
    base = f"{prefix}cache:{{{scope}}}"
    return base + ":e:", [base + ":lru", base + ":exp", base + ":sizes", base + ":tiers", base + ":bytes"]


def _ms() -> int:
    return int(time.time() * 1000)


class CacheStore:
    def __init__(self, redis):
        self.redis = redis
        self._get = redis.register_script(_GET)
        self._put = redis.register_script(_PUT)
        self._clear = redis.register_script(_CLEAR)

    async def get(self, prefix: str, scope: str, key: str) -> bytes | None:
        entries, index = scope_keys(prefix, scope)
        return await self._get(keys=[*index, entries + key], args=[key, _ms(), entries])

    async def put(self, prefix: str, scope: str, key: str, value: bytes, ttl_s: int, quota: int,
                  tier: str) -> tuple[bool, int, int]:
        """(stored, the scope's bytes after it, entries evicted to make room); not stored: larger
        than the whole quota."""
        entries, index = scope_keys(prefix, scope)
        stored, used, evicted = await self._put(keys=[*index, entries + key],
                                                args=[key, value, ttl_s * 1000, _ms(), quota, tier, entries])
        return bool(stored), int(used), int(evicted)

    async def clear(self, prefix: str, scope: str, tier: str | None = None) -> int:
        """Drop the scope's entries (only those of `tier` when given); how many went."""
        entries, index = scope_keys(prefix, scope)
        cleared, cursor = 0, 0
        while True:
            cursor, found = await self.redis.hscan(index[3], cursor, count=CLEAR_BATCH)
            ids = [k.decode() if isinstance(k, bytes) else k for k in found]
            if ids:
                cleared += int(await self._clear(keys=index[:5], args=[entries, tier or "", *ids]))
            if int(cursor) == 0:
                return cleared

    async def used(self, prefix: str, scope: str) -> tuple[int, int]:
        """(entries, bytes) the scope holds."""
        _, index = scope_keys(prefix, scope)
        return int(await self.redis.hlen(index[2])), int(await self.redis.get(index[4]) or 0)
