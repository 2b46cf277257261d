"""The API-managed tenants and keys in Redis. Every key carries the one hash tag `{registry}`,
so the write script and the snapshot's atomic read (policies/atomic.py) take them together on a Cluster.

- `tenants`, `keys`: hashes of JSON records (tenant name / key id -> record)
- `audit`: a stream of every change (who, what, before, after), capped; the full trail is the
  audit log files, and this stream is what replicas follow and /admin/audit pages through
- `version`: the id of the last entry, which replicas poll; the channel announces each one"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import Atomic, as_dict

_LUA = Path(__file__).resolve().parents[1] / "lua"
AUDIT_STREAM_CAP = 20_000  # entries kept in Redis; a replica further behind reloads everything
TENANT, KEY = "tenant", "key"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class RegistryKeys:
    prefix: str

    def _base(self) -> str:
        return f"{self.prefix}registry:{{registry}}"

    def records(self, kind: str) -> str:
        return f"{self._base()}:{kind}s"

    def audit(self) -> str:
        return f"{self._base()}:audit"

    def version(self) -> str:
        return f"{self._base()}:version"

    def channel(self) -> str:
        return f"{self.prefix}registry:changes"


@dataclass(frozen=True)
class Snapshot:
    tenants: dict[str, dict]
    keys: dict[str, dict]
    version: str  # the audit entry id it includes everything up to ('' = none yet)


@dataclass(frozen=True)
class Change:
    id: str      # the audit stream entry id: a total order of all changes
    entry: dict  # ts, who, action, kind, target, before, after


class RegistryStore:
    def __init__(self, redis: Any, prefix: str):
        self.redis = redis
        self.keys = RegistryKeys(prefix)
        self._write = redis.register_script((_LUA / "registry_write.lua").read_text())

    async def write(self, kind: str, target: str, after: dict | None, before: dict | None,
                    entry: dict) -> str | None:
        """The change's audit id, or None when the record is no longer `before` (someone changed it)."""
        k = self.keys
        reply = await self._write(
            keys=[k.records(kind), k.audit(), k.version()],
            args=[target, _dump(after), _dump(before), json.dumps(entry, separators=(",", ":")),
                  AUDIT_STREAM_CAP, k.channel()])
        return _text(reply[1]) if int(reply[0]) == 1 else None

    async def get(self, kind: str, target: str) -> dict | None:
        raw = await self.redis.hget(self.keys.records(kind), target)
        return None if raw is None else json.loads(raw)

    async def snapshot(self) -> Snapshot:
        atomic = Atomic(self.redis)
        atomic.call("HGETALL", self.keys.records(TENANT)).call("HGETALL", self.keys.records(KEY))
        tenants, keys, version = await atomic.call("GET", self.keys.version()).run()
        return Snapshot({_text(n): json.loads(v) for n, v in as_dict(tenants).items()},
                        {_text(n): json.loads(v) for n, v in as_dict(keys).items()}, _text(version) if version else "")

    async def version(self) -> str:
        value = await self.redis.get(self.keys.version())
        return _text(value) if value else ""

    async def changes_since(self, version: str, count: int = 500) -> list[Change] | None:
        """Changes after `version`, oldest first; None when the stream no longer reaches back to it."""
        start = version or "-"
        rows = await self.redis.xrange(self.keys.audit(), min=start, max="+", count=count + 1)
        changes = [_change(i, fields) for i, fields in rows]
        if version:
            if not changes or changes[0].id != version:
                return None
            changes = changes[1:]
        return changes

    async def audit_page(self, limit: int, before: str | None) -> list[Change]:
        """Newest first, `limit` entries older than `before` (an entry id), or the newest."""
        rows = await self.redis.xrevrange(self.keys.audit(), max=f"({before}" if before else "+", min="-",
                                          count=limit)
        return [_change(i, fields) for i, fields in rows]

    async def replace_all(self, tenants: dict[str, dict], keys: dict[str, dict], entry: dict) -> str:
        """Overwrite every record (the rebuild); one audit entry says so and moves the version."""
        k = self.keys
        atomic = Atomic(self.redis).call("DEL", k.records(TENANT), k.records(KEY))
        if tenants:
            atomic.hset(k.records(TENANT), {n: _dump(r) for n, r in tenants.items()})
        if keys:
            atomic.hset(k.records(KEY), {n: _dump(r) for n, r in keys.items()})
        atomic.call("XADD", k.audit(), "MAXLEN", "~", AUDIT_STREAM_CAP, "*",
                    "entry", json.dumps(entry, separators=(",", ":")))
        replies = await atomic.run()
        version = _text(replies[-1])
        await self.redis.set(k.version(), version)
        await self.redis.publish(k.channel(), version)
        return version


def _change(entry_id: Any, fields: dict) -> Change:
    return Change(_text(entry_id), json.loads(fields.get(b"entry") or fields.get("entry")))


def _dump(record: dict | None) -> str:
    return "" if record is None else json.dumps(record, separators=(",", ":"), sort_keys=True)
