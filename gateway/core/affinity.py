"""Prefix affinity: send prompts that share a long prefix to the worker that has it cached.

The prompt text is cut into fixed-size chunks; chunk i's key is a hash chained over chunks
0..i (seeded with the model name and the scope: the tenant's name by default, so one tenant's
prefixes are never found by another's lookups), so a key matches only if the whole prefix up to
it matches. Every key of one prompt carries its first chunk's hash as its Redis Cluster hash tag,
so one lookup's keys share a slot. Redis maps key -> URL of the worker that last served that prefix (with TTL).
A lookup is one MGET; the deepest key that names a live worker wins. Any Redis error
turns affinity off for a while: routing never waits on, or fails because of, Redis.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import time

from ..config import Affinity, RedisConfig
from .metrics import METRICS

log = logging.getLogger(__name__)
REDIS_ERRORS = (Exception,)  # redis.RedisError, OSError, timeouts: all mean "Redis unusable now"
MAX_PENDING_WRITES = 256


def prefix_keys(text: str, model: str, settings: Affinity, key_prefix: str, scope: str) -> list[str]:
    """`scope`: whose prefixes these are (a tenant's name; "" where every tenant shares them)."""
    size = settings.chunk_chars
    full_chunks = min(len(text) // size, settings.max_chunks)
    keys, tag = [], ""
    digest = hashlib.blake2b(f"{len(scope)}:{scope}:{model}".encode(), digest_size=12).digest()
    for i in range(full_chunks):
        digest = hashlib.blake2b(digest + text[i * size:(i + 1) * size].encode(), digest_size=12).digest()
        tag = tag or digest.hex()[:8]
        keys.append(f"{key_prefix}aff:{{{tag}}}:{digest.hex()}")
    return keys


class AffinityIndex:
    def __init__(self, redis):
        self.redis = redis
        self._off_until = 0.0
        self._pending: set[asyncio.Task] = set()

    def usable(self) -> bool:
        return self.redis is not None and time.monotonic() >= self._off_until

    def _failed(self, op: str, exc: BaseException, settings: RedisConfig) -> None:
        METRICS.redis_errors.labels(op).inc()
        if time.monotonic() >= self._off_until:  # log once per outage window, not per request
            log.warning("Redis %s failed (%s: %s); prefix affinity off for %.0fs",
                        op, type(exc).__name__, exc, settings.retry_after_s)
        self._off_until = time.monotonic() + settings.retry_after_s

    async def lookup(self, keys: list[str], settings: RedisConfig) -> str | None:
        """URL of the worker that served the longest known prefix, if any."""
        if not keys or not self.usable():
            return None
        try:
            values = await self.redis.mget(keys)
        except REDIS_ERRORS as exc:
            self._failed("affinity_lookup", exc, settings)
            return None
        for value in reversed(values):
            if value:
                return value.decode() if isinstance(value, bytes) else value
        return None

    def remember(self, keys: list[str], url: str, ttl_s: int, settings: RedisConfig) -> None:
        """Record url as the last server of these prefixes, in the background (off the hot path)."""
        if not keys or not self.usable() or len(self._pending) >= MAX_PENDING_WRITES:
            return
        task = asyncio.get_running_loop().create_task(self._write(keys, url, ttl_s, settings))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _write(self, keys, url, ttl_s, settings) -> None:
        try:
            pipe = self.redis.pipeline(transaction=False)
            for key in keys:
                pipe.set(key, url, ex=ttl_s)
            await pipe.execute()
        except REDIS_ERRORS as exc:
            self._failed("affinity_write", exc, settings)

    async def drain(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
