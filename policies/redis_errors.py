"""What a failed Redis call may raise; each means "Redis unusable now", never a client's fault.

redis-py's Cluster client raises RedisClusterException (not a RedisError) while slots move, and
its asyncio connections leak TypeError/AttributeError when the peer closed them (a killed
master): redis/redis-py#4287, #3835."""
from __future__ import annotations

import asyncio
import traceback

from redis.exceptions import RedisClusterException, RedisError

REDIS_DOWN = (RedisError, RedisClusterException, OSError, asyncio.TimeoutError, TypeError, AttributeError)


def unsent(exc: BaseException) -> bool:
    """Whether a call failed while writing its command to a connection closed under it, so nothing
    reached Redis and the call may be made again. After an error on one connection, redis-py's
    Cluster client disconnects the node's idle ones while another call may just have taken one;
    that call's write then raises AttributeError (TypeError on Python 3.12) from `writelines`."""
    if not isinstance(exc, (AttributeError, TypeError)):
        return False
    frames = {frame.f_code.co_name for frame, _ in traceback.walk_tb(exc.__traceback__)}
    return "_send_packed_command" in frames and "drain" not in frames
