"""API keys: only SHA-256 hashes are stored; a presented key is hashed and compared in constant time."""
from __future__ import annotations

import dataclasses
import hashlib
import hmac

from wire.errors import OpenAIError

from policies.config import PoliciesConfig, Tenant

ADMIN_TENANT = "_admin"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _unauthorized(message: str) -> OpenAIError:
    return OpenAIError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})


class KeyRing:
    """Maps a bearer key to its tenant.

    Every stored hash is compared with `hmac.compare_digest` on every lookup (no early exit and no
    dict probe keyed by the secret), so response time does not depend on how close a guess was.
    """

    def __init__(self, config: PoliciesConfig):
        entries: list[tuple[bytes, Tenant]] = []
        for tenant in config.tenants.values():
            for key in tenant.keys:
                entries.append((bytes.fromhex(key.sha256), dataclasses.replace(tenant, key_id=key.id)))
        if config.admin_key_sha256:
            admin = Tenant(ADMIN_TENANT, config.defaults, is_admin=True, key_id="admin")
            entries.append((bytes.fromhex(config.admin_key_sha256), admin))
        self._entries = entries
        self._anonymous = config.tenants.get(config.anonymous_tenant) if config.anonymous_tenant else None

    def holder(self, name: str, key_id: str | None) -> Tenant | None:
        """The tenant `name` as its key `key_id` authenticates it, while that key is still valid
        (work done later on a tenant's behalf: batch lines)."""
        return next((t for _, t in self._entries if t.name == name and t.key_id == key_id), None) \
            or (self._anonymous if self._anonymous is not None and self._anonymous.name == name
                and key_id == self._anonymous.key_id else None)

    def authenticate(self, authorization: str | None) -> Tenant:
        if not authorization or not authorization.strip():
            if self._anonymous is not None:
                return self._anonymous
            raise _unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _unauthorized("malformed Authorization header: expected 'Bearer <key>'")
        digest = hashlib.sha256(token.strip().encode("utf-8")).digest()
        found = None
        for stored, tenant in self._entries:
            if hmac.compare_digest(stored, digest) and found is None:
                found = tenant
        if found is None:
            raise _unauthorized("invalid API key")
        return found
