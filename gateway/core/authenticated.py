"""A request's key checked once: the open_requests middleware authenticates it first, and the
handler and the request metric take the same tenant from the request instead of hashing the key
again. Only what the same policy said for the same credential is reused; a refusal is not kept
(the handler answers it)."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from .context import credentials

_SEEN = web.RequestKey("tiergate_authenticated", tuple)


def authenticated(request: web.Request, policy: Any, *, bearer_only: bool = False) -> Any:
    """`policy.authenticate` of the request's credentials (`credentials()`: Authorization, else
    x-api-key; with `bearer_only`, the Authorization header alone), once per request."""
    given = request.headers.get("Authorization") if bearer_only else credentials(request)
    seen = request.get(_SEEN)
    if seen is not None and seen[0] is policy and seen[1] == given:
        return seen[2]
    tenant = policy.authenticate(given)
    request[_SEEN] = (policy, given, tenant)
    return tenant
