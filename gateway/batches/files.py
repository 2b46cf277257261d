"""Uploaded files and batch results, scoped to the tenant: metadata in Redis, bodies on disk.

A file's metadata is one hash (`meta`: the OpenAI file object) under a key that holds the
tenant's name as its hash tag (one transaction's keys share a Redis Cluster slot), so another tenant's file id is simply not found (a 404, as for an id that never
existed). A sorted set per tenant lists them by creation time. The body lives in the files
directory (bodies.py) and counts against the tenant's `storage` quota until the file is deleted
or expires (storage_quota.py); an expired file's body is removed by the next upload of its
tenant or by the runner's sweep.
"""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from policies.atomic import Atomic
from wire.errors import OpenAIError

from .storage_quota import Quota, StorageQuota
from .bodies import NAME, FileBodies

log = logging.getLogger(__name__)
PURPOSE_INPUT, PURPOSE_OUTPUT = "batch", "batch_output"


def new_file_id() -> str:
    return "file-" + os.urandom(12).hex()


def not_found(what: str, ident: str, param: str | None = None) -> OpenAIError:
    return OpenAIError(404, f"No {what} found with id '{ident}'.", param=param, code="not_found")


class FileStore:
    def __init__(self, redis, prefix: str, ttl_s: int, bodies: FileBodies):
        self.redis, self.prefix, self.ttl_s, self.bodies = redis, prefix, ttl_s, bodies
        self.quota = StorageQuota(redis, prefix, "files", "files", ttl_s)

    def key(self, tenant: str, file_id: str) -> str:
        return f"{self.prefix}file:{{{tenant}}}:{file_id}"

    def index_key(self, tenant: str) -> str:
        return f"{self.prefix}files:{{{tenant}}}"

    async def put(self, tenant: str, temp: Path, size: int, filename: str, purpose: str, quota: Quota) -> dict:
        """Keep the body written to `temp` as a file counted against `quota`; its OpenAI file object."""
        meta = self._meta(new_file_id(), size, filename, purpose)
        try:
            reserved = await self.quota.reserve(tenant, meta["id"], size, meta["expires_at"], quota)
        except BaseException:
            await self.bodies.discard(temp)
            raise
        try:
            await self.bodies.commit(temp, tenant, meta["id"])
            await self._list(tenant, meta)
        except BaseException:
            await self._undo(tenant, meta["id"], temp)
            raise
        await self.bodies.remove(tenant, *[i for i in reserved.expired if NAME.match(i)])
        return meta

    async def keep(self, tenant: str, file_id: str, size: int, filename: str, quota: Quota) -> dict:
        """List a batch result whose body is already on disk and counted at `size` (spool.py)."""
        meta = self._meta(file_id, size, filename, PURPOSE_OUTPUT)
        await self.quota.reserve(tenant, file_id, size, meta["expires_at"], quota)
        await self._list(tenant, meta)
        return meta

    def _meta(self, file_id: str, size: int, filename: str, purpose: str) -> dict:
        now = int(time.time())
        return {"id": file_id, "object": "file", "bytes": size, "created_at": now, "expires_at": now + self.ttl_s,
                "filename": filename, "purpose": purpose, "status": "processed", "status_details": None}

    async def _list(self, tenant: str, meta: dict) -> None:
        key = self.key(tenant, meta["id"])
        atomic = Atomic(self.redis).call("HSET", key, "meta", json.dumps(meta)).call("EXPIRE", key, self.ttl_s)
        await atomic.call("ZADD", self.index_key(tenant), meta["created_at"], meta["id"]).call(
            "EXPIRE", self.index_key(tenant), self.ttl_s).run()

    async def _undo(self, tenant: str, file_id: str, temp: Path) -> None:
        """A file that could not be recorded: its body and its share of the quota go."""
        await self.bodies.discard(temp)
        await self.bodies.remove(tenant, file_id)
        try:
            await self.quota.release(tenant, file_id)
        except Exception as exc:  # Redis away: the reservation expires with the file's TTL
            log.warning("could not give back the quota of file %s: %s", file_id, exc)

    async def meta(self, tenant: str, file_id: str) -> dict:
        raw = await self.redis.hget(self.key(tenant, file_id), "meta")
        if raw is None:
            raise not_found("file", file_id)
        return json.loads(raw)

    async def body(self, tenant: str, file_id: str) -> Path:
        """Where the file's body is; a 404 for a file this tenant does not have."""
        name = (await self.meta(tenant, file_id))["id"]
        path = self.bodies.path(tenant, name)
        if not path.exists() and not await self._move_to_disk(tenant, name):
            raise not_found("file", file_id)
        return path

    async def _move_to_disk(self, tenant: str, name: str) -> bool:
        """A file kept before bodies moved out of Redis: its body goes to disk on first use."""
        key = self.key(tenant, name)
        content = await self.redis.hget(key, "content")
        if content is None:
            return False
        await self.bodies.commit(await self.bodies.write(tenant, content), tenant, name)
        await self.redis.hdel(key, "content")
        return True

    async def content(self, tenant: str, file_id: str) -> bytes:
        try:
            return await self.bodies.read(tenant, (await self.body(tenant, file_id)).name)
        except FileNotFoundError:  # deleted meanwhile
            raise not_found("file", file_id) from None

    async def delete(self, tenant: str, file_id: str) -> None:
        if not await self.redis.delete(self.key(tenant, file_id)):
            raise not_found("file", file_id)
        await self.redis.zrem(self.index_key(tenant), file_id)
        await self.quota.release(tenant, file_id)
        await self.bodies.remove(tenant, file_id)

    async def listing(self, tenant: str, limit: int, after: str | None, purpose: str | None) -> dict:
        """Newest first, OpenAI's cursor page: `after` is the last id of the previous page."""
        ids = [i.decode() for i in await self.redis.zrevrange(self.index_key(tenant), 0, -1)]
        if after is not None:
            ids = ids[ids.index(after) + 1:] if after in ids else []
        found = []
        for file_id in ids:
            raw = await self.redis.hget(self.key(tenant, file_id), "meta")
            if raw is None:  # expired: drop it from the index too
                await self.redis.zrem(self.index_key(tenant), file_id)
                continue
            meta = json.loads(raw)
            if purpose is None or meta["purpose"] == purpose:
                found.append(meta)
            if len(found) > limit:
                break
        return {"object": "list", "data": found[:limit], "has_more": len(found) > limit,
                "first_id": found[0]["id"] if found else None,
                "last_id": found[:limit][-1]["id"] if found else None}
