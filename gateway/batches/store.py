"""Batches in Redis: one hash per batch (its fixed fields as `meta`, then status, timestamps,
counts, usage and how many bytes of its output and error files are kept) and one bitmap of the
lines that have a result. The results themselves are on disk, in the tenant's files (spool.py):
Redis holds progress only, whatever the answers weigh.

A result is recorded by one script that sets the line's bit, moves its file's kept length from
the length the writer saw to the new one and counts it, or does nothing: a line answered twice
(its first answer lost with a killed gateway) is kept and counted once, and bytes written past
the kept length are not part of the file. Status changes are
compare-and-set, so a cancel and the runner's last write cannot overwrite each other. A tenant's
keys carry its name as their hash tag, so each script or transaction touches one Cluster slot; the
set of active batches is shared by all tenants and written on its own.
"""
from __future__ import annotations

import json
import os
import time

from policies.atomic import Atomic

from .bodies import FileBodies
from .files import not_found

FINAL = ("completed", "failed", "expired", "cancelled")
RUNNING = ("validating", "in_progress", "finalizing", "cancelling")
TIMESTAMPS = ("in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at",
              "cancelled_at")

# 1: kept; 0: the line has a result already; -1: the file's kept length is not the writer's.
_RECORD = """
if redis.call('GETBIT', KEYS[1], ARGV[1]) == 1 then return 0 end
if tonumber(redis.call('HGET', KEYS[2], ARGV[6]) or '0') ~= tonumber(ARGV[7]) then return -1 end
redis.call('SETBIT', KEYS[1], ARGV[1], 1)
redis.call('HSET', KEYS[2], ARGV[6], ARGV[8])
if ARGV[9] == '1' then
  redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
  redis.call('HINCRBY', KEYS[2], 'input_tokens', ARGV[3])
  redis.call('HINCRBY', KEYS[2], 'output_tokens', ARGV[4])
end
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""
KEPT_FIELD = {"output": "output_bytes", "errors": "errors_bytes"}
_TRANSITION = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 0 end
for allowed in string.gmatch(ARGV[1], '[^,]+') do
  if allowed == status then
    redis.call('HSET', KEYS[1], 'status', ARGV[2], unpack(ARGV, 3))
    return 1
  end
end
return 0
"""


def new_batch_id() -> str:
    return "batch_" + os.urandom(12).hex()


class BatchStore:
    def __init__(self, redis, prefix: str, ttl_s: int, bodies: FileBodies):
        self.redis, self.prefix, self.ttl_s, self.bodies = redis, prefix, ttl_s, bodies
        self._record = redis.register_script(_RECORD)
        self._transition = redis.register_script(_TRANSITION)

    def key(self, tenant: str, batch_id: str) -> str:
        return f"{self.prefix}batch:{{{tenant}}}:{batch_id}"

    def results_key(self, tenant: str, batch_id: str) -> str:
        """Where batches recorded before results moved to disk kept them (resume.py moves them)."""
        return self.key(tenant, batch_id) + ":results"

    def done_key(self, tenant: str, batch_id: str) -> str:
        return self.key(tenant, batch_id) + ":done"

    def index_key(self, tenant: str) -> str:
        return f"{self.prefix}batches:{{{tenant}}}"

    @property
    def _active(self) -> str:
        return f"{self.prefix}batches:active"

    async def create(self, tenant: str, meta: dict) -> None:
        """The batch, with its own name for the input file's body on disk (deleting the file
        cannot starve it); that name goes when the batch ends."""
        key, now = self.key(tenant, meta["id"]), meta["created_at"]
        try:
            await self.bodies.share(tenant, meta["input_file_id"], _input(meta["id"]))
        except FileNotFoundError:  # the file was deleted meanwhile
            raise not_found("file", meta["input_file_id"], "input_file_id") from None
        try:
            atomic = Atomic(self.redis).hset(key, {"meta": json.dumps(meta), "status": "in_progress",
                                                   "in_progress_at": now, "completed": 0, "failed": 0,
                                                   "input_tokens": 0, "output_tokens": 0})
            await atomic.call("EXPIRE", key, self.ttl_s).call("ZADD", self.index_key(tenant), now, meta["id"]).call(
                "EXPIRE", self.index_key(tenant), self.ttl_s).run()
            try:  # after the record: a runner that meets an id without one forgets it
                await self.redis.sadd(self._active, json.dumps([tenant, meta["id"]]))
            except BaseException:
                await self.redis.delete(key)  # a batch nobody would run must not be listed
                raise
        except BaseException:
            await self.bodies.remove(tenant, _input(meta["id"]))
            raise

    async def input(self, tenant: str, batch_id: str) -> bytes:
        try:
            return await self.bodies.read(tenant, _input(batch_id))
        except FileNotFoundError:
            pass
        # a batch created before bodies moved to disk kept its input in Redis
        content = await self.redis.get(self.key(tenant, batch_id) + ":input")
        if content is None:
            raise not_found("batch input", batch_id)
        return content

    async def ended(self, tenant: str, batch_id: str) -> None:
        """A final batch no longer needs its input or its progress bitmap (the files hold the results)."""
        await self.redis.delete(self.results_key(tenant, batch_id), self.done_key(tenant, batch_id),
                                self.key(tenant, batch_id) + ":input")
        await self.bodies.remove(tenant, _input(batch_id))

    async def fields(self, tenant: str, batch_id: str) -> dict[str, str]:
        raw = await self.redis.hgetall(self.key(tenant, batch_id))
        if not raw:
            raise not_found("batch", batch_id)
        return {k.decode(): v.decode() for k, v in raw.items()}

    async def get(self, tenant: str, batch_id: str) -> dict:
        return batch_object(await self.fields(tenant, batch_id))

    async def active(self) -> list[tuple[str, str]]:
        return [tuple(json.loads(m)) for m in await self.redis.smembers(self._active)]

    async def count_active(self, tenant: str) -> int:
        return sum(1 for owner, _ in await self.active() if owner == tenant)

    async def done(self, tenant: str, batch_id: str) -> set[int]:
        bits = await self.redis.get(self.done_key(tenant, batch_id)) or b""
        return {i * 8 + b for i, byte in enumerate(bits) if byte for b in range(8) if byte & (0x80 >> b)}

    async def kept_bytes(self, tenant: str, batch_id: str) -> dict[str, int]:
        """How much of the output and error files is recorded (what follows was never counted)."""
        raw = await self.redis.hmget(self.key(tenant, batch_id), *KEPT_FIELD.values())
        return {kind: int(v or 0) for kind, v in zip(KEPT_FIELD, raw)}

    async def legacy_results(self, tenant: str, batch_id: str) -> dict[int, bytes]:
        raw = await self.redis.hgetall(self.results_key(tenant, batch_id))
        return {int(i): line for i, line in raw.items()}

    async def record(self, tenant: str, batch_id: str, index: int, ok: bool, tokens: tuple[int, int],
                     kind: str, kept: tuple[int, int], count: bool = True) -> int:
        """Mark line `index` done with its file `kind` kept from kept[0] to kept[1] bytes; 1 when this
        call did, 0 when the line had a result, -1 when the file's kept length was not kept[0]."""
        return int(await self._record(
            keys=[self.done_key(tenant, batch_id), self.key(tenant, batch_id)],
            args=[index, "completed" if ok else "failed", tokens[0], tokens[1], self.ttl_s, KEPT_FIELD[kind],
                  kept[0], kept[1], int(count)]))

    async def fail(self, tenant: str, batch_id: str, error: dict) -> None:
        """Why the batch fails, kept so that whoever finalizes it (after a restart too) says so."""
        await self.redis.hset(self.key(tenant, batch_id), "failure", json.dumps(error))

    async def move(self, tenant: str, batch_id: str, allowed: tuple[str, ...], status: str, **fields) -> bool:
        """Set `status` (and its timestamp, and `fields`) if the batch is in one of `allowed`."""
        stamp = {f"{status}_at": int(time.time())} if f"{status}_at" in TIMESTAMPS else {}
        pairs = [x for kv in {**stamp, **fields}.items() for x in kv]
        moved = await self._transition(keys=[self.key(tenant, batch_id)], args=[",".join(allowed), status, *pairs])
        if moved and status in FINAL:
            await self.redis.srem(self._active, json.dumps([tenant, batch_id]))
        return bool(moved)

    async def forget(self, tenant: str, batch_id: str) -> None:
        """Drop a batch whose record expired from the active set."""
        await self.redis.srem(self._active, json.dumps([tenant, batch_id]))

    async def listing(self, tenant: str, limit: int, after: str | None) -> dict:
        ids = [i.decode() for i in await self.redis.zrevrange(self.index_key(tenant), 0, -1)]
        if after is not None:
            ids = ids[ids.index(after) + 1:] if after in ids else []
        found = []
        for batch_id in ids:
            raw = await self.redis.hgetall(self.key(tenant, batch_id))
            if not raw:
                await self.redis.zrem(self.index_key(tenant), batch_id)
                continue
            found.append(batch_object({k.decode(): v.decode() for k, v in raw.items()}))
            if len(found) > limit:
                break
        page = found[:limit]
        return {"object": "list", "data": page, "has_more": len(found) > limit,
                "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None}


def _input(batch_id: str) -> str:
    return f"{batch_id}.input"


def batch_object(fields: dict[str, str]) -> dict:
    """The OpenAI batch object from a batch's stored fields."""
    meta = json.loads(fields["meta"])
    stamps = {name: int(fields[name]) if name in fields else None for name in TIMESTAMPS}
    completed, failed = int(fields["completed"]), int(fields["failed"])
    tokens_in, tokens_out = int(fields["input_tokens"]), int(fields["output_tokens"])
    failure = json.loads(fields["failure"]) if fields.get("failure") else None
    errors = {"object": "list", "data": [failure]} if failure else None
    return {"id": meta["id"], "object": "batch", "endpoint": meta["endpoint"], "errors": errors,
            "input_file_id": meta["input_file_id"], "completion_window": meta["completion_window"],
            "status": fields["status"], "output_file_id": fields.get("output_file_id") or None,
            "error_file_id": fields.get("error_file_id") or None, "created_at": meta["created_at"],
            "expires_at": meta["expires_at"], **stamps,
            "request_counts": {"total": meta["total"], "completed": completed, "failed": failed},
            "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out, "total_tokens": tokens_in + tokens_out,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}},
            "metadata": meta.get("metadata")}
