"""Uploaded files and batch results in Redis, scoped to the tenant.

A file is one hash (`meta`: the OpenAI file object, `content`: the bytes) under a key that
holds the tenant's name, so another tenant's file id is simply not found (a 404, as for an id
that never existed). A sorted set per tenant lists them by creation time.
"""
from __future__ import annotations

import json
import os
import time

from wire.errors import OpenAIError

PURPOSE_INPUT, PURPOSE_OUTPUT = "batch", "batch_output"


def new_file_id() -> str:
    return "file-" + os.urandom(12).hex()


def not_found(what: str, ident: str, param: str | None = None) -> OpenAIError:
    return OpenAIError(404, f"No {what} found with id '{ident}'.", param=param, code="not_found")


class FileStore:
    def __init__(self, redis, prefix: str, ttl_s: int):
        self.redis, self.prefix, self.ttl_s = redis, prefix, ttl_s

    def _key(self, tenant: str, file_id: str) -> str:
        return f"{self.prefix}file:{tenant}:{file_id}"

    def _index(self, tenant: str) -> str:
        return f"{self.prefix}files:{tenant}"

    async def put(self, tenant: str, content: bytes, filename: str, purpose: str,
                  file_id: str | None = None) -> dict:
        """Store (or, for a fixed `file_id`, overwrite) a file; its OpenAI file object."""
        now = int(time.time())
        meta = {"id": file_id or new_file_id(), "object": "file", "bytes": len(content), "created_at": now,
                "expires_at": now + self.ttl_s, "filename": filename, "purpose": purpose,
                "status": "processed", "status_details": None}
        key = self._key(tenant, meta["id"])
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"meta": json.dumps(meta), "content": content})
            pipe.expire(key, self.ttl_s)
            pipe.zadd(self._index(tenant), {meta["id"]: now})
            pipe.expire(self._index(tenant), self.ttl_s)
            await pipe.execute()
        return meta

    async def meta(self, tenant: str, file_id: str) -> dict:
        raw = await self.redis.hget(self._key(tenant, file_id), "meta")
        if raw is None:
            raise not_found("file", file_id)
        return json.loads(raw)

    async def content(self, tenant: str, file_id: str) -> bytes:
        raw = await self.redis.hget(self._key(tenant, file_id), "content")
        if raw is None:
            raise not_found("file", file_id)
        return raw

    async def delete(self, tenant: str, file_id: str) -> None:
        if not await self.redis.delete(self._key(tenant, file_id)):
            raise not_found("file", file_id)
        await self.redis.zrem(self._index(tenant), file_id)

    async def listing(self, tenant: str, limit: int, after: str | None, purpose: str | None) -> dict:
        """Newest first, OpenAI's cursor page: `after` is the last id of the previous page."""
        ids = [i.decode() for i in await self.redis.zrevrange(self._index(tenant), 0, -1)]
        if after is not None:
            ids = ids[ids.index(after) + 1:] if after in ids else []
        found = []
        for file_id in ids:
            raw = await self.redis.hget(self._key(tenant, file_id), "meta")
            if raw is None:  # expired: drop it from the index too
                await self.redis.zrem(self._index(tenant), file_id)
                continue
            meta = json.loads(raw)
            if purpose is None or meta["purpose"] == purpose:
                found.append(meta)
            if len(found) > limit:
                break
        return {"object": "list", "data": found[:limit], "has_more": len(found) > limit,
                "first_id": found[0]["id"] if found else None,
                "last_id": found[:limit][-1]["id"] if found else None}
