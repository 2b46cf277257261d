"""The `cache:` section: the gateway-wide switch of the exact response cache and the tenants that
share one. What each tenant caches, for how long and at what price is its policy's `cache:`."""
from __future__ import annotations

import re
from dataclasses import dataclass

from typedconfig import Fields, setting

_GROUP = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # ends up in Redis keys, like a tenant name


def _shared(f: Fields, key: str) -> dict[str, tuple[str, ...]]:
    groups = f.child(key)
    out = {}
    for name in list(groups.raw or {}):
        if not isinstance(name, str) or not _GROUP.match(name):
            groups.fail(str(name), "group names must match [A-Za-z0-9_.-]{1,64}")
        members = groups.string_list(name)
        if len(members) < 2:
            groups.fail(name, "a shared cache names at least two tenants")
        out[name] = tuple(members)
    return out


@dataclass(frozen=True)
class CacheConfig:
    enabled: bool = setting(False, "Serve repeated requests from the exact response cache in Redis "
                                   "(docs/caching.md): per tenant, under each tenant's cache policy and "
                                   "storage.cache_bytes. Off: no request reads or writes it.")
    shared: dict[str, tuple[str, ...]] = setting(
        doc="group -> tenants that share one cache (each tenant in one group at most). Without it no "
            "entry is ever served to another tenant. A shared cache tells each member, by a hit or by "
            "its speed, that another member asked the same (docs/caching.md).",
        factory=dict, parse=_shared, shown_as="mapping")
    max_entry_bytes: int = setting(256 << 10, "Largest answer stored (a stream: all its chunks); a larger "
                                              "one is served and not stored.", minimum=1024, maximum=16 << 20)
    max_pending_writes: int = setting(64, "Answers waiting to be written to the cache, per process; past it an "
                                          "answer is not stored (counted in tiergate_cache_total).", minimum=1)

    def scope_of(self, tenant: str) -> str:
        """The cache a tenant reads and writes: its shared group's, else its own."""
        for group, members in self.shared.items():
            if tenant in members:
                return f"g:{group}"
        return f"t:{tenant}"


def check_shared(top: Fields, cache: CacheConfig, tenants: dict) -> None:
    """Every member of a shared cache is a configured tenant, in one group at most."""
    seen: dict[str, str] = {}
    for group, members in cache.shared.items():
        for tenant in members:
            if tenant not in tenants:
                top.fail(f"cache.shared.{group}", f"names no tenant in tenants: {tenant!r}")
            if tenant in seen:
                top.fail(f"cache.shared.{group}", f"tenant {tenant!r} is already in group {seen[tenant]!r}")
            seen[tenant] = group
