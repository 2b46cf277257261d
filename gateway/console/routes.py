"""The console's routes: the page and its static files, and one JSON endpoint per view.

    GET  /console                    the single-page console (static/index.html)
    GET  /console/static/{file}      its script, styles and the vendored uPlot
    GET  /console/api/overview       traffic, spend and savings, reasons, errors
    GET  /console/api/routing        recent routing decisions (no prompt text unless logging is on)
    POST /console/api/route          a routing explanation for a pasted prompt (the /v1/route answer)
    GET  /console/api/quality        failure rates, similarity, threshold changes, swaps, shift
    GET  /console/api/workers        health, queues, caches and latency of every worker

All of them need the admin key when tenants are configured (access.py). Nothing here ever
returns an API key or a key hash: tenants appear by name only.
"""
from __future__ import annotations

from pathlib import Path

from aiohttp import web

from wire.errors import OpenAIError, bad_request

from policies.redis_errors import REDIS_DOWN

from ..core.body import read_body
from ..core.context import CTX
from ..api.explain import explain_route
from ..core.services import SERVICES
from .access import require_console_access
from .overview import overview
from .quality import quality
from .workers import workers

STATIC = Path(__file__).parent / "static"
FILES = {"console.js": "application/javascript", "console.css": "text/css",
         "uPlot.iife.min.js": "application/javascript", "uPlot.min.css": "text/css"}
RECENT_ROWS = 100
MAX_PROMPT_CHARS = 20_000


def _json(body: dict) -> web.Response:
    return web.json_response(body, headers={"Cache-Control": "no-store"})


async def _stored(view):
    """A view that reads Redis: a 503 naming the store when Redis does not answer, never a 500."""
    try:
        return await view
    except REDIS_DOWN as exc:
        raise OpenAIError(503, f"console store unavailable: {type(exc).__name__}", code="store_unavailable",
                          headers={"Retry-After": "1"}) from None


async def page(request: web.Request) -> web.StreamResponse:
    require_console_access(request, request[SERVICES])
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})


async def static_file(request: web.Request) -> web.StreamResponse:
    require_console_access(request, request[SERVICES])
    name = request.match_info["name"]
    if name not in FILES:
        raise OpenAIError(404, f"no console file {name!r}", code="not_found")
    path = STATIC / name if (STATIC / name).exists() else STATIC / "vendor" / name
    return web.FileResponse(path, headers={"Content-Type": FILES[name]})


async def overview_json(request: web.Request) -> web.Response:
    services = request[SERVICES]
    return _json(await _stored(overview(services, require_console_access(request, services))))


async def routing_json(request: web.Request) -> web.Response:
    services = request[SERVICES]
    require_console_access(request, services)
    config = services.config
    tenants = getattr(getattr(services.sinks.policy, "config", None), "tenants", None)
    rows = await _stored(services.sinks.activity.recent(RECENT_ROWS)) if services.sinks.activity.enabled else []
    return _json({"object": "tiergate.console.routing", "log_prompts": config.console.log_prompts,
                  "tenants": sorted(tenants) if tenants else [], "recent": rows,
                  "models": ["auto", *(t.name for t in config.tiers)]})


async def route_json(request: web.Request) -> web.Response:
    services = request[SERVICES]
    admin = require_console_access(request, services)
    body = await read_body(request, services.config.limits.max_body_bytes)
    prompt, model, tenant_name = body.get("prompt"), body.get("model", "auto"), body.get("tenant")
    if not isinstance(prompt, str) or not prompt.strip():
        raise bad_request("'prompt' must be a non-empty string", param="prompt")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise bad_request(f"'prompt' is longer than {MAX_PROMPT_CHARS} characters", param="prompt")
    if not isinstance(model, str):
        raise bad_request("'model' must be a string", param="model")
    tenant = admin
    if tenant_name:
        tenants = getattr(getattr(services.sinks.policy, "config", None), "tenants", None) or {}
        if tenant_name not in tenants:
            raise bad_request(f"unknown tenant {tenant_name!r}", param="tenant")
        tenant = tenants[tenant_name]
    chat = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    about, _ = await explain_route(services, tenant, chat, request[CTX])
    return _json(about)


async def quality_json(request: web.Request) -> web.Response:
    services = request[SERVICES]
    require_console_access(request, services)
    return _json(await _stored(quality(services)))


async def workers_json(request: web.Request) -> web.Response:
    services = request[SERVICES]
    require_console_access(request, services)
    return _json(await workers(services))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/console", page)
    app.router.add_get("/console/", page)
    app.router.add_get("/console/static/{name}", static_file)
    app.router.add_get("/console/api/overview", overview_json)
    app.router.add_get("/console/api/routing", routing_json)
    app.router.add_post("/console/api/route", route_json)
    app.router.add_get("/console/api/quality", quality_json)
    app.router.add_get("/console/api/workers", workers_json)


def describe(json_body, error_schema: dict) -> dict:
    """The console's paths for /openapi.json (merged into gateway/api/openapi.py's SPEC)."""
    denied = {"401": json_body(error_schema, "Not the admin key (with tenants configured); carries a Basic challenge")}
    page = {"description": "The console page", "content": {"text/html": {"schema": {"type": "string"}}}}
    security = [{"apiKey": []}, {"basic": []}, {}]

    def view(summary: str) -> dict:
        return {"get": {"summary": summary, "security": security,
                        "responses": {"200": json_body({"type": "object"}, "The view's data"), **denied}}}

    return {
        "/console": {"get": {"summary": "The console (read-only)", "security": security,
                             "responses": {"200": page, **denied}}},
        "/console/": {"get": {"summary": "The console (read-only)", "security": security,
                              "responses": {"200": page, **denied}}},
        "/console/static/{name}": {"get": {
            "summary": "The console's script, styles and vendored chart library", "security": security,
            "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "The file"}, **denied,
                          "404": json_body(error_schema, "No such console file")}}},
        "/console/api/overview": view("Traffic, spend, savings, tier mix, reasons and errors"),
        "/console/api/routing": view("Recent routing decisions (no prompt text unless console.log_prompts)"),
        "/console/api/quality": view("Failure rate over time, similarity, threshold changes, swaps, shift"),
        "/console/api/workers": view("Health, queues, caches and latency of every worker"),
        "/console/api/route": {"post": {
            "summary": "A routing explanation for a prompt, as a tenant (default: the caller)", "security": security,
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["prompt"], "properties": {
                    "prompt": {"type": "string", "minLength": 1, "maxLength": MAX_PROMPT_CHARS},
                    "model": {"type": "string"}, "tenant": {"type": ["string", "null"]}}}}}},
            "responses": {"200": json_body({"$ref": "#/components/schemas/RouteDecision"}, "The decision"),
                          "400": json_body(error_schema, "Invalid request: `param` names the field"), **denied}}},
    }
