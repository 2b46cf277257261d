"""`POST /admin/cache/clear` and `GET /admin/cache`: an admin key empties the response cache of
one tenant (of its shared group, if it is in one), or of every tenant, whole or only the
entries of one tier (a change: a key of scope write); and sees what each holds. Open only
where no tenants are configured."""
from __future__ import annotations

from aiohttp import web

from wire.errors import OpenAIError, bad_request

from ..admin.access import WRITE
from ..admin.view import require_admin
from ..core.body import read_body
from ..core.context import credentials
from ..core.services import SERVICES

MAX_CLEAR_BODY = 4096


def _scopes(services, tenant: str | None) -> list[str]:
    """The caches a clear or a read names: the tenant's, or every tenant's (each shared one once)."""
    config, keyring = services.config, getattr(services.sinks.policy, "keyring", None)
    names = (keyring.tenant_names() if keyring is not None else list(config.policies.tenants)) or ["anonymous"]
    if tenant is not None:
        if not isinstance(tenant, str) or tenant not in names:
            raise OpenAIError(404, f"no tenant {str(tenant)[:64]!r} in the config", param="tenant",
                              code="not_found")
        names = [tenant]
    return list(dict.fromkeys(config.cache.scope_of(name) for name in names))


def _store(services):
    cache = services.cache
    if cache.store is None:
        raise OpenAIError(404, "the response cache needs the gateway's Redis, which is not configured",
                          code="not_found")
    return cache.store


async def clear(request: web.Request) -> web.Response:
    """Body (optional): {"tenant": name, "tier": name}; without a tenant, every tenant's cache."""
    services = request[SERVICES]
    require_admin(request, services)
    who = services.sinks.policy.authenticate(credentials(request))
    if getattr(who, "admin_scope", WRITE) != WRITE:
        raise OpenAIError(403, f"admin key {who.key_id!r} may read but not clear the cache", type="permission_error",
                          code="admin_scope_insufficient")
    asked = await read_body(request, MAX_CLEAR_BODY) if request.can_read_body else {}
    unknown = set(asked) - {"tenant", "tier"}
    if unknown:
        name = sorted(unknown)[0]
        raise bad_request(f"'{name[:40]}' is not a field of a cache clear (tenant, tier)", param=name,
                          code="unsupported_parameter")
    tier = asked.get("tier")
    if tier is not None and (not isinstance(tier, str) or services.config.tier(tier) is None):
        raise bad_request(f"no tier {str(tier)[:64]!r} in the config", param="tier", code="invalid_value")
    scopes = _scopes(services, asked.get("tenant"))
    store, prefix = _store(services), services.config.redis.key_prefix
    cleared = 0
    for scope in scopes:
        cleared += await store.clear(prefix, scope, tier)
        services.cache.semantic.index.clear(scope, tier)  # this process's; another's finds the answers gone
    return web.json_response({"cleared": cleared, "scopes": scopes, "tier": tier})


async def holdings(request: web.Request) -> web.Response:
    """Entries and bytes per cache (`?tenant=` for one tenant's)."""
    services = request[SERVICES]
    require_admin(request, services)
    store, prefix = _store(services), services.config.redis.key_prefix
    out = {}
    for scope in _scopes(services, request.query.get("tenant")):
        entries, used = await store.used(prefix, scope)
        out[scope] = {"entries": entries, "bytes": used}
    return web.json_response({"caches": out})


def add_routes(app: web.Application) -> None:
    app.router.add_post("/admin/cache/clear", clear)
    app.router.add_get("/admin/cache", holdings)
