"""A batch's output and error files, written on disk line by line as results come, each line
counted against the tenant's storage quota before it is written.

The files are the tenant's own bodies (`file-<stem>-output`, `file-<stem>-errors`), unlisted
until the batch ends; Redis keeps how many bytes of each are recorded (store.py). A line is
written at that length (cutting whatever a crash or a lost reply left past it) and then recorded;
so after a restart the files are cut back to what Redis recorded and no line is lost or doubled.
"""
from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from policies.redis_errors import REDIS_DOWN
from wire.errors import OpenAIError

from .files import FileStore
from .storage_quota import Quota
from .store import KEPT_FIELD, BatchStore

RESERVE_AHEAD = 64 << 10  # quota taken ahead of the file, so most lines add no round trip between bill and record


def result_file_id(batch_id: str, kind: str) -> str:
    return f"file-{batch_id.removeprefix('batch_')}-{kind}"


def _write_at(path: Path, at: int, data: bytes) -> None:
    """No fsync per line: a killed process loses nothing written (the OS has it), and the
    window between a line's bill and its record stays short; publish() syncs the file."""
    with open(path, "r+b" if path.exists() else "w+b") as handle:
        handle.truncate(at)
        handle.seek(at)
        handle.write(data)


def _sync(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _cut(path: Path, at: int) -> int:
    """The file cut back to `at` bytes; its length (shorter than `at` when bytes were lost)."""
    if not path.exists():
        return 0
    with open(path, "r+b") as handle:
        handle.truncate(min(at, os.fstat(handle.fileno()).st_size))
        return os.fstat(handle.fileno()).st_size


class ResultSpool:
    def __init__(self, files: FileStore, batches: BatchStore, tenant: str, batch_id: str, quota: Quota, ttl_s: int):
        self.files, self.batches, self.tenant, self.batch_id = files, batches, tenant, batch_id
        self.quota, self.ttl_s = quota, ttl_s
        self.kept: dict[str, int] | None = None  # None: read it from Redis before the next write
        self.reserved = {kind: 0 for kind in KEPT_FIELD}  # bytes of quota each file holds (at least its length)
        self.lock = asyncio.Lock()

    def path(self, kind: str) -> Path:
        return self.files.bodies.path(self.tenant, result_file_id(self.batch_id, kind))

    async def _load(self) -> dict[str, int]:
        kept = await self.batches.kept_bytes(self.tenant, self.batch_id)
        for kind, at in kept.items():
            await asyncio.to_thread(self.path(kind).parent.mkdir, parents=True, exist_ok=True)
            if await asyncio.to_thread(_cut, self.path(kind), at) < at:
                raise OSError(f"batch {self.batch_id}: its {kind} file is shorter than recorded ({at} bytes)")
        self.kept = kept
        return kept

    async def lengths(self) -> dict[str, int]:
        async with self.lock:
            return dict(await self._load())

    async def append(self, index: int, line: bytes, ok: bool, tokens: tuple[int, int], count: bool = True) -> bool:
        """Write and record line `index` (True), or nothing when it has a result already (False).
        Past the quota: the quota's OpenAIError (413/429), nothing written."""
        kind = "output" if ok else "errors"
        async with self.lock:
            kept = self.kept if self.kept is not None else await self._load()
            at, file_id = kept[kind], result_file_id(self.batch_id, kind)
            end = at + len(line) + 1
            if end > self.reserved[kind]:
                await self._reserve(file_id, kind, end)
            try:
                await asyncio.to_thread(_write_at, self.path(kind), at, line + b"\n")
                recorded = await self.batches.record(self.tenant, self.batch_id, index, ok, tokens, kind, (at, end),
                                                     count)
            except REDIS_DOWN:
                self.kept = None  # the script may have run: Redis says next time what is kept
                raise
            if recorded == 1:
                kept[kind] = end
                return True
            self.kept = None  # cut back and re-read: another result holds the line, or another writer moved on
            await self._load()
            return False

    async def _reserve(self, file_id: str, kind: str, end: int) -> None:
        """Quota for the file up to `end` bytes, and some ahead where the quota has it."""
        expires_at = int(time.time()) + self.ttl_s
        try:
            await self.files.quota.reserve(self.tenant, file_id, end + RESERVE_AHEAD, expires_at, self.quota)
            self.reserved[kind] = end + RESERVE_AHEAD
        except OpenAIError:  # near the quota: exactly what this line needs, or the refusal
            await self.files.quota.reserve(self.tenant, file_id, end, expires_at, self.quota)
            self.reserved[kind] = end

    async def publish(self, filename_stem: str) -> tuple[str | None, str | None]:
        """The files as the tenant's (listed, readable, counted at their length), ids fixed by the
        batch id so that doing it again after a crash rewrites rather than duplicates them; None
        for an empty one."""
        ids = []
        for kind in KEPT_FIELD:
            size = (await self.lengths())[kind]
            if not size:
                await self.files.bodies.remove(self.tenant, result_file_id(self.batch_id, kind))
                await self.files.quota.release(self.tenant, result_file_id(self.batch_id, kind))
                ids.append(None)
                continue
            await asyncio.to_thread(_sync, self.path(kind))
            meta = await self.files.keep(self.tenant, result_file_id(self.batch_id, kind), size,
                                         f"{filename_stem}_{kind}.jsonl", self.quota)
            ids.append(meta["id"])
        return ids[0], ids[1]
