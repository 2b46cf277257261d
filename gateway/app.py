"""The aiohttp application: routes, middlewares, lifecycle."""
from __future__ import annotations

import asyncio

from aiohttp import web

from webwire.errors import CLIENT_ID, REQUEST_ID, error_middleware

from wire.errors import OpenAIError

from .admin import alert_routes, registry_routes
from .dropin import routes as dropin
from .api import explain, handlers
from .core.body import READ_PIECE
from .core.authenticated import authenticated
from .core.context import CTX, MODEL, OVERHEAD, TIER, RequestContext
from .batches import api as batches_api
from .batches.runner import BatchRunner
from .cache import admin as cache_admin
from .console import routes as console
from .core.metrics import METRICS
from .api.openapi import openapi_endpoint
from .quality import api as quality_api
from .server.errors import GatewayRunner
from .server.read_timeouts import HeaderDeadlineHandler
from .server.shutdown import finish_within
from .core.services import SERVICES
from .state import STATE, GatewayState

_UNMETERED = {"/metrics", "/health"}


@web.middleware
async def tiergate_headers(request: web.Request, handler):
    """x-request-id and x-tiergate-* on every answer, and the per-request metric read from the
    answer: its headers say where it was served."""
    ctx = RequestContext.begin(request.headers)
    request[CTX] = ctx
    request[SERVICES] = request.app[STATE].services  # the one snapshot every handler of this request reads
    request[REQUEST_ID] = ctx.request_id  # what a 500's body names
    if ctx.client_request_id:
        request[CLIENT_ID] = ctx.client_request_id  # and its log line, next to ours
    response = await handler(request)
    headers = response.headers
    # answers that reached no worker; streams sent theirs at the start. The tier header comes
    # only with the whole set (ctx.headers()): an answer that has it has them all.
    if not response.prepared and TIER not in headers:
        for name, value in ctx.headers().items():
            headers.setdefault(name, value)
    if request.path not in _UNMETERED and not request.path.startswith("/console"):
        tier = headers.get(TIER, "none")
        METRICS.requests.labels(_tenant(request), tier, headers.get(MODEL, "none"), str(response.status)).inc()
        METRICS.overhead.labels(tier).observe(float(headers.get(OVERHEAD, 0.0)) / 1000.0)
    return response


@web.middleware
async def open_requests(request: web.Request, handler):
    """Every /v1 request holds a place among its tenant's (and key's) open requests until its
    answer, or its stream, ends, however it ends (a client gone cancels the handler)."""
    policy = request[SERVICES].sinks.policy
    if policy is None or not request.path.startswith("/v1/"):
        return await handler(request)
    try:
        tenant = authenticated(request, policy)
    except OpenAIError:
        return await handler(request)  # the handler answers the refusal
    slot = await policy.hold(tenant)
    if slot is None:  # no limit to count against: no task to give a place back
        return await handler(request)
    try:
        return await handler(request)
    finally:
        await asyncio.shield(policy.let_go(slot))


def _tenant(request: web.Request) -> str:
    """The key's holder (the handlers authenticated it the same way), or "none" for a key refused
    or absent: read here, so nothing is written on the answer for this middleware to read."""
    policy = request[SERVICES].sinks.policy
    try:
        return authenticated(request, policy).name if policy is not None else "none"
    except OpenAIError:
        return "none"


def build_app(state: GatewayState) -> web.Application:
    # Every handler reads its body through body.py under the limit of the config it runs with
    # (reloadable); aiohttp's own cap, for any read() that bypasses it, is the limit at start.
    app = web.Application(middlewares=[tiergate_headers, error_middleware, open_requests],
                          client_max_size=state.services.config.limits.max_body_bytes)
    app[STATE] = state
    app.router.add_post("/v1/chat/completions", handlers.chat_completions)
    app.router.add_post("/v1/completions", handlers.completions)
    app.router.add_post("/v1/embeddings", handlers.embeddings)
    app.router.add_post("/v1/responses", dropin.responses)
    app.router.add_post("/v1/messages", dropin.messages)
    app.router.add_post("/v1/route", explain.route_dry_run)
    app.router.add_get("/v1/models", handlers.list_models)
    app.router.add_get("/v1/usage", handlers.usage)
    batches_api.add_routes(app)  # /v1/files, /v1/batches
    app.router.add_get("/health", handlers.health)
    app.router.add_get("/metrics", handlers.metrics_endpoint)
    app.router.add_get("/openapi.json", openapi_endpoint)
    quality_api.add_routes(app)  # /v1/quality, /admin/classifier/reload
    console.add_routes(app)  # /console and its JSON
    registry_routes.add_routes(app)  # /admin/tenants, /admin/keys, /admin/audit
    alert_routes.add_routes(app)  # /admin/alerts
    cache_admin.add_routes(app)  # /admin/cache: clear and read the response cache

    # batch lines go through the one request path, with the services current when each line runs
    batches = BatchRunner(lambda: state.services, lambda services, call, gate: handlers.serve(services, call, gate=gate))

    async def lifecycle(app: web.Application):
        await state.start()
        batches.start()
        yield
        await finish_within("the batch runner", batches.stop())
        await state.stop()

    app.cleanup_ctx.append(lifecycle)
    return app


async def start_site(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Serve app on host:port with SO_REUSEPORT so several processes can share the port.

    Header limits and the JSON answer to requests the HTTP parser refuses: server_errors.py."""
    # read_bufsize: what aiohttp buffers (and inflates) ahead of the handler per request
    limits = app[STATE].services.config.limits
    runner = GatewayRunner(app, handler_class=HeaderDeadlineHandler, header_timeout_s=limits.header_read_timeout_s,
                           keepalive_timeout=limits.keepalive_timeout_s, handler_cancellation=True,
                           access_log=None, read_bufsize=READ_PIECE)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_port=True, backlog=1024)
    await site.start()
    return runner
