"""/admin/alerts: the budget alerts and their webhook delivery status, newest first."""
from __future__ import annotations

from aiohttp import web

from policies.redis_errors import unavailable_as_503
from policies.registry.admin import page_size
from wire.errors import OpenAIError

from .access import READ, admin_policy


async def list_alerts(request: web.Request) -> web.Response:
    policy, _ = admin_policy(request, READ)
    alerts = getattr(policy, "alerts", None)
    if alerts is None:
        raise OpenAIError(404, "budget alerts need tenants and Redis", code="alerts_off")
    limit = page_size(request.query.get("limit"), 50)
    with unavailable_as_503("the alert store is"):
        page = await alerts.store.page(limit + 1, request.query.get("before"))
    return web.json_response({"object": "list", "data": page[:limit], "has_more": len(page) > limit,
                              "last_id": page[:limit][-1]["id"] if page else None},
                             headers={"Cache-Control": "no-store"})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/admin/alerts", list_alerts)
