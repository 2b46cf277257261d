"""File bodies on disk, under `batches.files_dir`: one folder per tenant, one file per body.

Paths are built only from ids the gateway generated and a folder name derived from the
tenant's configured name, never from a client's string. A body is written to a temporary file
and renamed into place, so a reader (another replica on the shared volume) sees all of it or
nothing. Blocking file work runs in threads, off the event loop.
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import time
from pathlib import Path
from typing import Callable

from wire.errors import OpenAIError

NAME = re.compile(r"^(file-[0-9a-f]{24}(-output|-errors)?|batch_[0-9a-f]{24}\.input)$")
TENANT = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$")
TEMP = ".tmp-"
CHUNK = 1 << 16
FLUSH = 1 << 20  # bytes gathered before one write to disk


def tenant_folder(tenant: str) -> str:
    """A folder name for the tenant: never '.', '..' or a path, whatever the name holds."""
    if TENANT.match(tenant):
        return "t-" + tenant
    return "h-" + hashlib.sha256(tenant.encode()).hexdigest()[:32]


def _sync_write(handle, data: bytes) -> None:
    handle.write(data)


def _finish(handle, data: bytes) -> None:
    try:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    finally:
        handle.close()


def _link_or_copy(source: Path, target: Path) -> None:
    temp = target.with_name(TEMP + os.urandom(8).hex())
    try:
        os.link(source, temp)
    except OSError:  # a filesystem without hard links: a copy
        shutil.copyfile(source, temp)
    os.replace(temp, target)


def _sweep(root: Path, older_than_s: float, temps_older_than_s: float) -> int:
    now, removed = time.time(), 0
    for path in root.glob("*/*"):
        try:
            age = now - path.stat().st_mtime
            if age > (temps_older_than_s if path.name.startswith(TEMP) else older_than_s):
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


class FileBodies:
    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser()

    def path(self, tenant: str, name: str) -> Path:
        if not NAME.match(name):
            raise ValueError(f"not a name the gateway gives a stored body: {name!r}")
        return self.root / tenant_folder(tenant) / name

    async def _temp(self, tenant: str) -> Path:
        folder = self.root / tenant_folder(tenant)
        await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
        return folder / (TEMP + os.urandom(8).hex())

    async def receive(self, tenant: str, part, limit: int, too_large: Callable[[], OpenAIError]) -> tuple[Path, int]:
        """Stream a multipart field to a temporary file; `too_large()` is raised as soon as more
        than `limit` bytes have arrived (nothing past the limit is kept)."""
        temp = await self._temp(tenant)
        handle = await asyncio.to_thread(open, temp, "wb")
        size, buffer = 0, bytearray()
        try:
            while chunk := await part.read_chunk(CHUNK):
                size += len(chunk)
                if size > limit:
                    raise too_large()
                buffer += chunk
                if len(buffer) >= FLUSH:
                    await asyncio.to_thread(_sync_write, handle, bytes(buffer))
                    buffer.clear()
            await asyncio.to_thread(_finish, handle, bytes(buffer))
        except BaseException:
            handle.close()
            await self.discard(temp)
            raise
        return temp, size

    async def write(self, tenant: str, content: bytes) -> Path:
        """`content` in a temporary file, for `commit`."""
        temp = await self._temp(tenant)
        handle = await asyncio.to_thread(open, temp, "wb")
        await asyncio.to_thread(_finish, handle, content)
        return temp

    async def commit(self, temp: Path, tenant: str, name: str) -> None:
        await asyncio.to_thread(os.replace, temp, self.path(tenant, name))

    async def discard(self, temp: Path) -> None:
        await asyncio.to_thread(temp.unlink, missing_ok=True)

    async def share(self, tenant: str, name: str, as_name: str) -> None:
        """A second name for a body (a batch's own input): deleting the first keeps the second."""
        await asyncio.to_thread(_link_or_copy, self.path(tenant, name), self.path(tenant, as_name))

    async def read(self, tenant: str, name: str) -> bytes:
        return await asyncio.to_thread(self.path(tenant, name).read_bytes)

    async def remove(self, tenant: str, *names: str) -> None:
        for name in names:
            await asyncio.to_thread(self.path(tenant, name).unlink, missing_ok=True)

    async def sweep(self, older_than_s: float, temps_older_than_s: float = 3600) -> int:
        """Remove bodies older than any metadata can be (and abandoned temporary files)."""
        return await asyncio.to_thread(_sweep, self.root, older_than_s, temps_older_than_s)
