"""Every API-managed tenant and key rebuilt into Redis from the audit logs (after Redis lost
them): each record is the `after` of its last change, in the order the changes were made."""
from __future__ import annotations

from policies.registry.audit import entry, read_audit
from policies.registry.store import KEY, TENANT, RegistryStore


async def rebuild_registry(store: RegistryStore, paths: list[str]) -> dict:
    """Give it every replica's audit files (rotated ones too); replicas reload when it is done."""
    records: dict[str, dict[str, dict]] = {TENANT: {}, KEY: {}}
    lines = read_audit(paths)
    for line in lines:
        kind, target, after = line.entry.get("kind"), line.entry.get("target"), line.entry.get("after")
        if kind not in records:
            continue
        if after is None:
            records[kind].pop(target, None)
        else:
            records[kind][target] = after
    tenants, keys = records[TENANT], records[KEY]
    summary = {"tenants": len(tenants), "keys": len(keys), "audit_lines": len(lines)}
    version = await store.replace_all(tenants, keys, entry("rebuild-registry", "registry.rebuild", "registry",
                                                           "*", None, summary))
    return {**summary, "version": version}
