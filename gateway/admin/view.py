"""Who sees what on /health and /metrics: liveness and the operational series to anyone (k8s
probes and Prometheus need no key); worker URLs and every per-tenant series (requests, tokens,
spend, budgets) only to the admin key, or to every caller where no tenants are configured
(such a gateway serves every endpoint open, on loopback or with --insecure-open)."""
from __future__ import annotations

from aiohttp import web

from wire.errors import OpenAIError

from ..core.policy_seam import OpenPolicy


def sees_everything(request: web.Request, services) -> bool:
    """The admin key, or no tenants configured; never a 401: a probe without a key gets less, not nothing."""
    policy = services.sinks.policy
    if isinstance(policy, OpenPolicy):
        return True
    if policy is None:
        return False
    try:
        tenant = policy.authenticate(request.headers.get("Authorization"))
    except OpenAIError:
        return False
    return bool(getattr(tenant, "is_admin", False))


def require_admin(request: web.Request, services) -> None:
    """A 401 without a valid key, a 403 for a tenant's key; open where no tenants are configured."""
    policy = services.sinks.policy
    tenant = policy.authenticate(request.headers.get("Authorization"))
    if not isinstance(policy, OpenPolicy) and not getattr(tenant, "is_admin", False):
        raise OpenAIError(403, "this endpoint needs the admin key", code="admin_required",
                          type="permission_error")
