"""API keys: only SHA-256 hashes are stored. A presented key is hashed and its digest looked up,
in the config's keys and then in this replica's copy of the API-managed ones (registry/cache.py):
no Redis call, for a known key or an unknown one.

A lookup keyed by the digest leaks nothing through its timing: a caller cannot choose a digest,
so how far a probe gets tells nothing about any stored hash (that is why only digests are keys)."""
from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import Any

from wire.errors import OpenAIError

from policies.config import PoliciesConfig, Tenant
from policies.registry.records import key_tenant, tenant_policy

ADMIN_TENANT = "_admin"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _unauthorized(message: str, code: str = "invalid_api_key") -> OpenAIError:
    return OpenAIError(401, message, code=code, headers={"WWW-Authenticate": "Bearer"})


def refusal(record: dict, digest: bytes, now: float) -> OpenAIError | None:
    """Why an API-managed key may not be used now, or None."""
    if record.get("revoked_at"):
        return _unauthorized(f"API key {record['id']} was revoked", "key_revoked")
    if record.get("expires_at") and record["expires_at"] <= now:
        return _unauthorized(f"API key {record['id']} expired", "key_expired")
    secret = next((s for s in record["secrets"] if bytes.fromhex(s["sha256"]) == digest), None)
    if secret is None or (secret["until"] is not None and secret["until"] <= now):
        return _unauthorized(f"this secret of API key {record['id']} was replaced by a rotation and its grace "
                             "period is over: use the new one", "key_rotated")
    return None


class KeyRing:
    """Maps a bearer key to its tenant: the config's keys first (the config wins for what it
    names), then the API-managed keys of `registry`, whose tenants may be the config's or its own."""

    def __init__(self, config: PoliciesConfig, tier_names: list[str] = (), registry: Any = None):
        self._config, self._tier_names, self._registry = config, list(tier_names), registry
        entries: dict[bytes, Tenant] = {}
        for tenant in config.tenants.values():
            for key in tenant.keys:
                entries[bytes.fromhex(key.sha256)] = dataclasses.replace(tenant, key_id=key.id)
        if config.admin_key_sha256:
            entries[bytes.fromhex(config.admin_key_sha256)] = self._admin("admin", "write")
        for admin in config.admin_keys:
            entries[bytes.fromhex(admin.sha256)] = self._admin(admin.id, admin.scope)
        self._entries = entries
        self._anonymous = config.tenants.get(config.anonymous_tenant) if config.anonymous_tenant else None
        self._tenants: dict[str, tuple[dict, Tenant]] = {}        # API tenant: (its record, built)
        self._keys: dict[str, tuple[dict, Tenant, Tenant]] = {}   # key id: (record, tenant, as the key sees it)

    def _admin(self, key_id: str, scope: str) -> Tenant:
        return Tenant(ADMIN_TENANT, self._config.defaults, is_admin=True, key_id=key_id, admin_scope=scope)

    def tenant_names(self) -> list[str]:
        api = list(self._registry.tenants) if self._registry is not None else []
        return list(self._config.tenants) + [n for n in api if n not in self._config.tenants]

    def tenant(self, name: str) -> Tenant | None:
        """The tenant `name` as the config (first) or the API defines it."""
        configured = self._config.tenants.get(name)
        if configured is not None or self._registry is None:
            return configured
        record = self._registry.tenants.get(name)
        if record is None:
            return None
        built = self._tenants.get(name)
        if built is None or built[0] is not record:
            try:
                policy = tenant_policy(self._config, self._tier_names, record["policy"])
            except OpenAIError as exc:  # the config changed under it (a tier gone): its keys are refused
                raise OpenAIError(403, f"tenant {name!r} has a policy this gateway's config cannot apply: "
                                       f"{exc.message}", code="tenant_misconfigured") from None
            built = self._tenants[name] = (record, Tenant(name, policy))
        return built[1]

    def _api_key(self, key_id: str, digest: bytes | None) -> Tenant:
        record = self._registry.keys[key_id]
        if digest is not None:
            refused = refusal(record, digest, time.time())
            if refused is not None:
                raise refused
        tenant = self.tenant(record["tenant"])
        if tenant is None:
            raise _unauthorized(f"the tenant of API key {key_id} no longer exists", "tenant_not_found")
        built = self._keys.get(key_id)
        if built is None or built[0] is not record or built[1] is not tenant:
            if len(self._keys) > 2 * len(self._registry.keys) + 1024:
                self._keys.clear()  # deleted keys' entries: start over rather than grow
            built = self._keys[key_id] = (record, tenant, key_tenant(tenant, record))
        return built[2]

    def holder(self, name: str, key_id: str | None) -> Tenant | None:
        """The tenant `name` as its key `key_id` authenticates it, while that key is still valid
        (work done later on a tenant's behalf: batch lines)."""
        found = next((t for t in self._entries.values() if t.name == name and t.key_id == key_id), None)
        if found is not None:
            return found
        if self._anonymous is not None and self._anonymous.name == name and key_id == self._anonymous.key_id:
            return self._anonymous
        record = self._registry.keys.get(key_id) if self._registry is not None and key_id else None
        if record is None or record["tenant"] != name or record.get("revoked_at") \
                or (record.get("expires_at") and record["expires_at"] <= time.time()):
            return None
        try:
            return self._api_key(key_id, None)
        except OpenAIError:
            return None

    def authenticate(self, authorization: str | None) -> Tenant:
        if not authorization or not authorization.strip():
            if self._anonymous is not None:
                return self._anonymous
            raise _unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _unauthorized("malformed Authorization header: expected 'Bearer <key>'")
        digest = hashlib.sha256(token.strip().encode("utf-8")).digest()
        found = self._entries.get(digest)
        if found is not None:
            return found
        key_id = self._registry.by_digest.get(digest) if self._registry is not None else None
        if key_id is None:
            raise _unauthorized("invalid API key")
        return self._api_key(key_id, digest)
