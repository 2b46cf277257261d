"""Several Redis commands run as one (all or none seen by anyone else), the same way on one
server, a Sentinel group and a Cluster: a Lua script that makes the calls (policies/lua/atomic.lua).

Not MULTI/EXEC through redis-py: its asyncio Cluster transaction runs each queued command on a new
thread under asyncio.run (redis.asyncio.cluster.TransactionStrategy.execute_command). When the
Cluster client must (re)connect first (its first command, or the first after a connection error:
a failover), it connects on that thread's loop, which closes right after; the connections stay in
the pool bound to a dead loop, and the next command or aclose() on them raises `Event loop is
closed` (the reconcile command exited 1 on a Cluster; a request's Redis call could fail the same way)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

_SCRIPT = (Path(__file__).parent / "lua" / "atomic.lua").read_text()
HSET_FIELDS_PER_CALL = 1000  # Lua unpacks one command's words onto its C stack (about 8000 slots)


class Atomic:
    """Commands gathered, then run together by `run`; the replies come as Redis sends them
    (HGETALL: a flat list of field, value; see `as_dict`)."""

    def __init__(self, redis):
        self._script = redis.register_script(_SCRIPT)
        self.keys: list[str] = []
        self.words: list[Any] = []

    def call(self, *command: Any) -> "Atomic":
        """One command, its key (if any) second: KEY-first commands are all this needs."""
        if len(command) > 1 and command[1] not in self.keys:
            self.keys.append(command[1])
        self.words += [len(command), *command]
        return self

    def hset(self, key: str, mapping: dict) -> "Atomic":
        items = [word for pair in mapping.items() for word in pair]
        for start in range(0, len(items), 2 * HSET_FIELDS_PER_CALL):
            self.call("HSET", key, *items[start:start + 2 * HSET_FIELDS_PER_CALL])
        return self

    async def run(self) -> list:
        return await self._script(keys=self.keys, args=self.words) if self.words else []


def as_dict(flat: list) -> dict:
    """HGETALL's reply inside a script: field, value, field, value..."""
    return dict(zip(flat[::2], flat[1::2]))
