"""Who may open the console: the admin key, or anyone when no tenants are configured.

Browsers cannot attach a bearer token to a page they navigate to, so the console also takes
HTTP Basic credentials with the admin key as the password (any user name): the 401 carries
`WWW-Authenticate: Basic`, the browser asks once and then sends it with every console request.
"""
from __future__ import annotations

import base64
import binascii

from aiohttp import web

from wire.errors import OpenAIError

from ..core.policy_seam import OpenPolicy

_CHALLENGE = {"WWW-Authenticate": 'Basic realm="tiergate console", charset="UTF-8"'}


def as_bearer(authorization: str | None) -> str | None:
    """`Basic base64(user:key)` becomes `Bearer key`; anything else is passed on as it is."""
    if not authorization:
        return authorization
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return authorization
    try:
        _, _, key = base64.b64decode(token.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return f"Bearer {key}" if key else None


def require_console_access(request: web.Request, services):
    """The admin tenant (or the open policy's anonymous one); 401 with a Basic challenge otherwise."""
    if isinstance(services.sinks.policy, OpenPolicy):
        return services.sinks.policy.authenticate(None)
    try:
        tenant = services.sinks.policy.authenticate(as_bearer(request.headers.get("Authorization")))
    except OpenAIError as exc:
        if exc.status != 401:
            raise
        tenant = None
    if tenant is None or not getattr(tenant, "is_admin", False):
        raise OpenAIError(401, "the console needs the admin key (as a bearer token, or as the password of "
                          "HTTP Basic auth)", code="admin_required", type="authentication_error", headers=_CHALLENGE)
    return tenant
