"""Which gateway process drains batches: the holder of a lease in Redis. It renews the lease
while it lives; when it dies the lease runs out and another process (or its restart) takes
over, so exactly one process dispatches a batch's lines at a time."""
from __future__ import annotations

import os

_HOLD = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not holder then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class Lease:
    def __init__(self, redis, key: str, ttl_s: float):
        self.key, self.ttl_ms = key, max(1, int(ttl_s * 1000))
        self.token = os.urandom(12).hex()
        self._hold = redis.register_script(_HOLD)
        self._release = redis.register_script(_RELEASE)

    async def hold(self) -> bool:
        """Take the lease if it is free, renew it if it is ours; False while another holds it."""
        return bool(await self._hold(keys=[self.key], args=[self.token, self.ttl_ms]))

    async def release(self) -> None:
        await self._release(keys=[self.key], args=[self.token])
