"""/admin/tenants, /admin/keys and /admin/audit: the operator's API for tenants and keys
(policies/registry/admin.py does the work; this file is HTTP only)."""
from __future__ import annotations

from aiohttp import web

from policies.registry.admin import page_size

from ..core.body import read_body
from .access import READ, WRITE, admin_of

MAX_ADMIN_BODY = 64 * 1024  # a tenant's policy or a key's fields: small by construction


async def _body(request: web.Request) -> dict:
    """The JSON object sent, or {} for an empty body (rotate and revoke need none)."""
    if not request.body_exists:
        return {}
    return await read_body(request, MAX_ADMIN_BODY)


def _json(data: dict, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, headers={"Cache-Control": "no-store"})


async def list_tenants(request: web.Request) -> web.Response:
    admin, _ = admin_of(request, READ)
    return _json(admin.list_tenants())


async def create_tenant(request: web.Request) -> web.Response:
    admin, who = admin_of(request, WRITE)
    return _json(await admin.create_tenant(who, await _body(request)))


async def get_tenant(request: web.Request) -> web.Response:
    admin, _ = admin_of(request, READ)
    return _json(admin.get_tenant(request.match_info["name"]))


async def update_tenant(request: web.Request) -> web.Response:
    admin, who = admin_of(request, WRITE)
    return _json(await admin.update_tenant(who, request.match_info["name"], await _body(request)))


async def delete_tenant(request: web.Request) -> web.Response:
    admin, who = admin_of(request, WRITE)
    return _json(await admin.delete_tenant(who, request.match_info["name"]))


async def list_keys(request: web.Request) -> web.Response:
    admin, _ = admin_of(request, READ)
    q = request.query
    return _json(admin.list_keys(q.get("tenant"), page_size(q.get("limit")), q.get("after")))


async def create_key(request: web.Request) -> web.Response:
    admin, who = admin_of(request, WRITE)
    key, secret = await admin.create_key(who, await _body(request))
    return _json({**key, "secret": secret})


async def get_key(request: web.Request) -> web.Response:
    admin, _ = admin_of(request, READ)
    return _json(await admin.get_key(request.match_info["key_id"]))


async def update_key(request: web.Request) -> web.Response:
    admin, who = admin_of(request, WRITE)
    return _json(await admin.update_key(who, request.match_info["key_id"], await _body(request)))


async def rotate_key(request: web.Request) -> web.Response:
    admin, who = admin_of(request, WRITE)
    key, secret = await admin.rotate_key(who, request.match_info["key_id"], await _body(request))
    return _json({**key, "secret": secret})


async def revoke_key(request: web.Request) -> web.Response:
    admin, who = admin_of(request, WRITE)
    return _json(await admin.revoke_key(who, request.match_info["key_id"]))


async def delete_key(request: web.Request) -> web.Response:
    admin, who = admin_of(request, WRITE)
    return _json(await admin.delete_key(who, request.match_info["key_id"]))


async def audit(request: web.Request) -> web.Response:
    admin, _ = admin_of(request, READ)
    return _json(await admin.audit(page_size(request.query.get("limit"), 50), request.query.get("before")))


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/admin/tenants", list_tenants)
    r.add_post("/admin/tenants", create_tenant)
    r.add_get("/admin/tenants/{name}", get_tenant)
    r.add_patch("/admin/tenants/{name}", update_tenant)
    r.add_delete("/admin/tenants/{name}", delete_tenant)
    r.add_get("/admin/keys", list_keys)
    r.add_post("/admin/keys", create_key)
    r.add_get("/admin/keys/{key_id}", get_key)
    r.add_patch("/admin/keys/{key_id}", update_key)
    r.add_delete("/admin/keys/{key_id}", delete_key)
    r.add_post("/admin/keys/{key_id}/rotate", rotate_key)
    r.add_post("/admin/keys/{key_id}/revoke", revoke_key)
    r.add_get("/admin/audit", audit)
