"""Who may use /admin/: an admin key (the config's admin_key_sha256 or policy.admin_keys), and
for a change one whose scope is `write`. A tenant's key is a 403 on every admin route, checked
before anything is read. Each handler takes the policy from the request's Services snapshot."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from wire.errors import OpenAIError

from ..console.access import as_bearer
from ..core.context import credentials
from ..core.services import SERVICES

READ, WRITE = "read", "write"
CONSOLE_HEADER = "X-Tiergate-Console"


def _credentials(request: web.Request) -> str | None:
    """The bearer key; from the console, the admin key it holds as HTTP Basic's password. Basic is
    taken only with X-Tiergate-Console: a browser sends cached Basic credentials with any request
    to this origin, but no other site's page may add that header (CORS preflight, never granted)."""
    if request.headers.get(CONSOLE_HEADER) == "1":
        return as_bearer(request.headers.get("Authorization"))
    return credentials(request)


def admin_policy(request: web.Request, scope: str) -> tuple[Any, str]:
    """(the request's policy, the admin key's id) for an admin key of `scope`, or the refusal."""
    policy = request[SERVICES].sinks.policy
    who = policy.authenticate(_credentials(request))
    if not getattr(who, "is_admin", False):
        raise OpenAIError(403, "this endpoint needs an admin key", code="admin_required", type="permission_error")
    if scope == WRITE and who.admin_scope != WRITE:
        raise OpenAIError(403, f"admin key {who.key_id!r} may read but not change (its scope is "
                               f"{who.admin_scope!r})", code="admin_scope_insufficient", type="permission_error")
    return policy, who.key_id


def admin_of(request: web.Request, scope: str) -> tuple[Any, str]:
    """(the policy's registry admin, the admin key's id) or the refusal."""
    policy, who = admin_policy(request, scope)
    admin = getattr(policy, "admin", None)
    if admin is None:
        raise OpenAIError(404, "tenants and keys are managed through /admin/ only with Redis", code="registry_off")
    return admin, who
