"""The operations /admin/ runs on tenants and keys. Each change is read, validated, written only
if nobody changed the record meanwhile (the write script compares), recorded in the audit
stream and this replica's audit file, and applied to this replica's copy before answering (so
the caller reads its own write here; other replicas follow within their propagation time)."""
from __future__ import annotations

import re
import time
from typing import Any, Callable

from redis.exceptions import RedisError

from wire.errors import OpenAIError

from policies.config import PoliciesConfig
from policies.redis_errors import unavailable_as_503
from policies.registry import keygen, records
from policies.registry.audit import AuditLine, entry
from policies.registry.cache import RegistryCache
from policies.registry.store import KEY, TENANT
from policies.usage_log import UsageLog

MAX_PAGE = 1000
_STREAM_ID = re.compile(r"^[0-9]{1,20}-[0-9]{1,20}$")
CAS_TRIES = 5  # concurrent changes of one record: read and try again this often, then 409


def _not_found(what: str, name: str) -> OpenAIError:
    return OpenAIError(404, f"no {what} {name!r}", code=f"{what}_not_found")


def _store():
    """Redis away: a 503 to retry (a write that reached Redis before the error is in the audit)."""
    return unavailable_as_503("the tenant and key store is")


def page_size(value: Any, default: int = 100) -> int:
    try:
        size = int(value) if value is not None else default
    except (TypeError, ValueError):
        size = 0
    if not 1 <= size <= MAX_PAGE:
        raise OpenAIError(400, f"'limit' must be a whole number from 1 to {MAX_PAGE}", param="limit")
    return size


class RegistryAdmin:
    def __init__(self, cache: RegistryCache, config: PoliciesConfig, tier_names: list[str],
                 audit_log: Callable[[], UsageLog]):
        self.cache, self.store = cache, cache.store
        self.config, self.tier_names = config, tier_names
        self._audit_log = audit_log

    # -- tenants ---------------------------------------------------------------------------------
    def _tenant_view(self, name: str) -> dict | None:
        if name in self.config.tenants:
            keys = [k.id for k in self.config.tenants[name].keys]
            return {"object": "tiergate.tenant", "name": name, "source": "config", "config_keys": keys,
                    "shadows_api_tenant": name in self.cache.tenants}
        record = self.cache.tenants.get(name)
        return None if record is None else {"object": "tiergate.tenant", "source": "api", **record}

    def list_tenants(self) -> dict:
        names = sorted(set(self.config.tenants) | set(self.cache.tenants))
        return {"object": "list", "data": [self._tenant_view(n) for n in names]}

    def get_tenant(self, name: str) -> dict:
        view = self._tenant_view(name)
        if view is None:
            raise _not_found("tenant", name)
        return view

    def _not_configured(self, name: str) -> None:
        if name in self.config.tenants:
            raise OpenAIError(409, f"tenant {name!r} is defined in {self.config.source}, which wins over the API: "
                                   "change it there", code="managed_by_config")

    async def create_tenant(self, who: str, body: Any) -> dict:
        record = records.new_tenant(self.config, self.tier_names, body)
        self._not_configured(record["name"])

        def create(before: dict | None) -> dict:
            if before is not None:
                raise OpenAIError(409, f"tenant {record['name']!r} exists", code="tenant_exists")
            return record
        await self._change(who, "tenant.create", TENANT, record["name"], create)
        return self.get_tenant(record["name"])

    async def update_tenant(self, who: str, name: str, body: Any) -> dict:
        self._not_configured(name)

        def update(before: dict | None) -> dict:
            if before is None:
                raise _not_found("tenant", name)
            return records.changed_tenant(self.config, self.tier_names, before, body)
        await self._change(who, "tenant.update", TENANT, name, update)
        return self.get_tenant(name)

    async def delete_tenant(self, who: str, name: str) -> dict:
        self._not_configured(name)
        live = [k["id"] for k in self.cache.keys.values() if k["tenant"] == name and not k.get("revoked_at")]
        if live:
            raise OpenAIError(409, f"tenant {name!r} still has {len(live)} unrevoked key(s) (first: {live[0]}): "
                                   "revoke them first", code="tenant_has_keys")

        def delete(before: dict | None) -> None:
            if before is None:
                raise _not_found("tenant", name)
            return None
        await self._change(who, "tenant.delete", TENANT, name, delete)
        return {"object": "tiergate.tenant.deleted", "name": name, "deleted": True}

    # -- keys ------------------------------------------------------------------------------------
    def list_keys(self, tenant: str | None, limit: int, after: str | None) -> dict:
        ids = sorted(i for i, k in self.cache.keys.items() if tenant is None or k["tenant"] == tenant)
        if after:
            ids = [i for i in ids if i > after]
        page = ids[:limit]
        return {"object": "list", "data": [records.public_key(self.cache.keys[i]) for i in page],
                "has_more": len(ids) > limit, "last_id": page[-1] if page else None}

    async def get_key(self, key_id: str) -> dict:
        with _store():
            record = await self.store.get(KEY, key_id)
        if record is None:
            raise _not_found("key", key_id)
        return records.public_key(record)

    async def create_key(self, who: str, body: Any) -> tuple[dict, str]:
        secret = keygen.new_secret()
        key_id = keygen.new_key_id()
        record = records.new_key(body, key_id, keygen.digest_hex(secret), keygen.visible_prefix(secret))
        if record["tenant"] not in self.config.tenants and record["tenant"] not in self.cache.tenants:
            raise _not_found("tenant", record["tenant"])

        def create(before: dict | None) -> dict:
            if before is not None:
                raise OpenAIError(409, f"key id {key_id} exists; try again", code="key_exists")
            return record
        after = await self._change(who, "key.create", KEY, key_id, create)
        return records.public_key(after), secret

    async def update_key(self, who: str, key_id: str, body: Any) -> dict:
        return records.public_key(await self._change(
            who, "key.update", KEY, key_id, lambda before: records.changed_key(self._found(before, key_id), body)))

    async def rotate_key(self, who: str, key_id: str, body: Any) -> tuple[dict, str]:
        grace = records.grace_of(body if body is not None else {})
        secret = keygen.new_secret()
        digest, prefix = keygen.digest_hex(secret), keygen.visible_prefix(secret)

        def rotate(before: dict | None) -> dict:
            record = self._found(before, key_id)
            if record.get("revoked_at"):
                raise OpenAIError(409, f"key {key_id} is revoked: create a new one", code="key_revoked")
            return records.rotated_key(record, digest, prefix, grace, time.time())
        after = await self._change(who, "key.rotate", KEY, key_id, rotate)
        return records.public_key(after), secret

    async def revoke_key(self, who: str, key_id: str) -> dict:
        def revoke(before: dict | None) -> dict:
            record = self._found(before, key_id)
            now = int(time.time())
            return {**record, "revoked_at": record.get("revoked_at") or now, "updated_at": now}
        return records.public_key(await self._change(who, "key.revoke", KEY, key_id, revoke))

    async def delete_key(self, who: str, key_id: str) -> dict:
        await self._change(who, "key.delete", KEY, key_id, lambda before: self._found(before, key_id) and None)
        return {"object": "tiergate.key.deleted", "id": key_id, "deleted": True}

    @staticmethod
    def _found(record: dict | None, key_id: str) -> dict:
        if record is None:
            raise _not_found("key", key_id)
        return record

    # -- audit -----------------------------------------------------------------------------------
    async def audit(self, limit: int, before: str | None) -> dict:
        if before is not None and not _STREAM_ID.match(before):
            raise OpenAIError(400, "'before' must be an audit entry id (as in last_id)", param="before")
        with _store():
            changes = await self.store.audit_page(limit + 1, before)
        page = changes[:limit]
        return {"object": "list", "data": [{"id": c.id, **c.entry} for c in page],
                "has_more": len(changes) > limit, "last_id": page[-1].id if page else None}

    # -- the one write path ----------------------------------------------------------------------
    async def _change(self, who: str, action: str, kind: str, target: str,
                      mutate: Callable[[dict | None], dict | None]) -> dict | None:
        for _ in range(CAS_TRIES):
            with _store():
                before = await self.store.get(kind, target)
            after = mutate(before)
            change = entry(who, action, kind, target, before, after)
            with _store():
                change_id = await self.store.write(kind, target, after, before, change)
            if change_id is not None:
                self._audit_log().append(AuditLine(change_id, change))
                try:
                    await self.cache.catch_up()
                except (RedisError, OSError):
                    pass  # made and audited; this replica's copy follows when Redis answers again
                return after
        raise OpenAIError(409, f"{kind} {target!r} kept changing under this request; try again", code="conflict")

