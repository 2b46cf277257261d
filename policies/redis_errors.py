"""What a failed Redis call may raise; each means "Redis unusable now", never a client's fault.

redis-py's Cluster client raises RedisClusterException (not a RedisError) while slots move, and
its asyncio connections leak TypeError/AttributeError when the peer closed them (a killed
master): redis/redis-py#4287, #3835."""
from __future__ import annotations

import asyncio

from redis.exceptions import RedisClusterException, RedisError

REDIS_DOWN = (RedisError, RedisClusterException, OSError, asyncio.TimeoutError, TypeError, AttributeError)
