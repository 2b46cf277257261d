"""One object per (kind, Redis client, key prefix) in a process: what a config reload's new
PolicyService shares with the old one (the registry's copy, the budget alerts), so their
background tasks run once and nothing they hold is read twice."""
from __future__ import annotations

from typing import Any, Callable, TypeVar

T = TypeVar("T")
_MADE: dict[tuple[str, int, str], tuple[Any, Any]] = {}


def one_per_redis(kind: str, redis: Any, prefix: str, make: Callable[[], T]) -> T:
    key = (kind, id(redis), prefix)
    made = _MADE.get(key)
    if made is None or made[0] is not redis:  # id() reused by a new client: a new object
        made = _MADE[key] = (redis, make())
    return made[1]
