"""What a failed Redis call may raise; each means "Redis unusable now", never a client's fault.

redis-py's Cluster client raises RedisClusterException (not a RedisError) while slots move, and
its asyncio connections leak TypeError/AttributeError when the peer closed them (a killed
master): redis/redis-py#4287, #3835."""
from __future__ import annotations

import asyncio
import traceback
from contextlib import contextmanager
from typing import Awaitable, Callable, Iterator, TypeVar

from redis.exceptions import MaxConnectionsError, RedisClusterException, RedisError

from wire.errors import OpenAIError

T = TypeVar("T")
REDIS_DOWN = (RedisError, RedisClusterException, OSError, asyncio.TimeoutError, TypeError, AttributeError)


@contextmanager
def unavailable_as_503(what: str) -> Iterator[None]:
    """Redis away during an operator's call (the admin API): a 503 to retry, never a 500."""
    try:
        yield
    except (RedisError, RedisClusterException, OSError, asyncio.TimeoutError) as exc:
        raise OpenAIError(503, f"{what} unavailable ({type(exc).__name__}); try again", code="service_unavailable",
                          headers={"Retry-After": "1"}) from None


def unsent(exc: BaseException) -> bool:
    """Whether a call failed while writing its command to a connection closed under it, so nothing
    reached Redis and the call may be made again. After an error on one connection, redis-py's
    Cluster client disconnects the node's idle ones while another call may just have taken one;
    that call's write then raises AttributeError (TypeError on Python 3.12) from `writelines`."""
    if not isinstance(exc, (AttributeError, TypeError)):
        return False
    frames = {frame.f_code.co_name for frame, _ in traceback.walk_tb(exc.__traceback__)}
    return "_send_packed_command" in frames and "drain" not in frames


class RedisUnavailable(Exception):
    """Redis could not serve a policy call (down, timed out, or full)."""


class RedisFull(RedisUnavailable):
    """Redis answers but refuses writes (maxmemory with noeviction): never a reason to serve unlimited."""


async def pooled(call: Callable[[], Awaitable[T]], waiting: list[bool]) -> T:
    """redis-py's default pool raises MaxConnectionsError past 100 concurrent commands instead
    of waiting; that is a busy client, not a Redis outage: wait for a free connection. A call
    whose command never left (`unsent`) is made once more, on another connection."""
    delay, resent = 0.001, False
    while True:
        try:
            waiting[0] = False
            return await call()
        except MaxConnectionsError:
            waiting[0] = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)
        except (AttributeError, TypeError) as exc:
            if resent or not unsent(exc):
                raise
            resent = True
