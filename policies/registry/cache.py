"""Each replica's copy of every API-managed tenant and key, so authentication never waits on Redis:
a known key and an unknown one are both answered from memory.

It follows Redis two ways: the channel announces each change at once, and every
`policy.key_sync_interval_s` the version key is compared with the copy's (covering a lost
subscription, and Redis Cluster, whose asyncio client has no pub/sub). Either way the copy
reads the changes after its version from the audit stream and applies them in order; a copy so
far behind that the capped stream no longer reaches back reads everything again."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from policies import metrics
from policies.process_wide import one_per_redis
from policies.registry.store import KEY, TENANT, Change, RegistryStore, Snapshot

log = logging.getLogger(__name__)
RESUBSCRIBE_S = 0.2  # after a broken subscription, try again this soon (the poll covers meanwhile)


class RegistryCache:
    def __init__(self, store: RegistryStore, interval_s: float):
        self.store = store
        self.interval_s = interval_s
        self.tenants: dict[str, dict] = {}
        self.keys: dict[str, dict] = {}
        self.by_digest: dict[bytes, str] = {}  # SHA-256 of a secret -> key id
        self.version = ""
        self.subscribed = False
        self._lock = asyncio.Lock()

    # -- applying --------------------------------------------------------------------------------
    def _replace(self, snapshot: Snapshot) -> None:
        self.tenants, self.keys, self.by_digest = dict(snapshot.tenants), {}, {}
        for key_id, record in snapshot.keys.items():
            self._set_key(key_id, record)
        self.version = snapshot.version

    def _set_key(self, key_id: str, record: dict | None) -> None:
        old = self.keys.pop(key_id, None)
        for secret in (old or {}).get("secrets", ()):
            self.by_digest.pop(bytes.fromhex(secret["sha256"]), None)
        if record is not None:
            self.keys[key_id] = record
            for secret in record["secrets"]:
                self.by_digest[bytes.fromhex(secret["sha256"])] = key_id

    def apply(self, change: Change) -> None:
        entry = change.entry
        if entry["kind"] == KEY:
            self._set_key(entry["target"], entry["after"])
        elif entry["kind"] == TENANT:
            if entry["after"] is None:
                self.tenants.pop(entry["target"], None)
            else:
                self.tenants[entry["target"]] = entry["after"]
        self.version = change.id

    # -- following Redis -------------------------------------------------------------------------
    async def load(self) -> None:
        async with self._lock:
            self._replace(await self.store.snapshot())

    async def catch_up(self) -> None:
        """Apply every change after this copy's version (or read everything again)."""
        async with self._lock:
            while True:
                changes = await self.store.changes_since(self.version)
                if changes is None:
                    metrics.REGISTRY_SYNC.labels("reload").inc()
                    self._replace(await self.store.snapshot())
                    return
                for change in changes:
                    if change.entry.get("kind") in (KEY, TENANT):
                        metrics.REGISTRY_SYNC.labels("change").inc()
                        self.apply(change)
                    elif change.entry.get("action") == "registry.rebuild":
                        self._replace(await self.store.snapshot())
                        return
                    self.version = change.id
                if len(changes) < 500:
                    return

    async def follow(self) -> None:
        """Runs for the life of the process: the subscription and the version poll side by side."""
        await asyncio.gather(self._listen(), self._poll())

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                if await self.store.version() != self.version:
                    await self.catch_up()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: the copy stays as it is, the next round tries again
                log.debug("registry poll: %s: %s", type(exc).__name__, exc)

    async def _listen(self) -> None:
        if not hasattr(self.store.redis, "pubsub"):
            return  # Redis Cluster's asyncio client: the poll alone
        while True:
            pubsub = self.store.redis.pubsub()
            try:
                await pubsub.subscribe(self.store.keys.channel())
                self.subscribed = True
                await self.catch_up()  # whatever changed while not subscribed
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is not None and message.get("type") == "message":
                        await self.catch_up()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                metrics.REGISTRY_SYNC.labels("lost").inc()
                log.warning("registry subscription lost (%s: %s); polling every %.1f s until it is back",
                            type(exc).__name__, exc, self.interval_s)
            finally:
                self.subscribed = False
                await _close(pubsub)
            await asyncio.sleep(RESUBSCRIBE_S)


async def _close(pubsub: Any) -> None:
    try:
        await pubsub.aclose()
    except Exception:  # the connection is already gone
        pass


def registry_cache(redis: Any, prefix: str, interval_s: float) -> RegistryCache:
    """The process-wide copy for this Redis client and key prefix: a config reload keeps it."""
    cache = one_per_redis("registry", redis, prefix, lambda: RegistryCache(RegistryStore(redis, prefix), interval_s))
    cache.interval_s = interval_s
    return cache
