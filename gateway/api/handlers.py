"""HTTP handlers for the OpenAI endpoints (and `serve`, the one request path), models, usage, health
and metrics."""
from __future__ import annotations

import os
import time
from contextlib import nullcontext
from dataclasses import replace

from aiohttp import web

from webwire.tracing import span
from wire.errors import OpenAIError, bad_request
from wire.tags import TAGS_HEADER, split_tags

from ..core import metrics
from ..admin.view import sees_everything
from ..cache.controls import from_headers, take_controls
from ..cache.entry import Recorder
from ..cache.hit import serve_hit
from ..cache.service import BYPASS, MISS, NOT_FOUND, SEMANTIC
from ..core.authenticated import authenticated
from ..core.context import CACHE, CTX, RequestContext
from ..config import AUTO
from .embeddings import plan_embeddings_route
from ..core.conclude import Admitted, conclude
from ..core.body import read_authenticated
from ..core.request import Call, GatewayRequest, max_tokens_asked, max_tokens_on, parse
from ..core.policy_seam import OpenPolicy
from ..core.relay import Delivery, relay
from ..core.routing import plan_route
from ..core.cascade import NOT_ASKED, plan_request_cascade
from ..core.services import SERVICES, Services

# The endpoints that serve each kind of tier (a tier's `task`); what /v1/models tells clients.
ENDPOINTS = {"generate": ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"),
             "embed": ("/v1/embeddings",)}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await generate(request, "chat")


async def completions(request: web.Request) -> web.StreamResponse:
    return await generate(request, "completion")


async def embeddings(request: web.Request) -> web.StreamResponse:
    return await generate(request, "embeddings")


async def generate(request: web.Request, kind: str, *, body: dict | None = None, tenant=None,
                   shaper=None) -> web.StreamResponse:
    """An HTTP request on the one request path: authenticate from the headers, then read the
    body (nothing is read for a caller without a key), then `serve`.

    Translating endpoints (/v1/responses, /v1/messages) pass an already translated chat `body`,
    the `tenant` they authenticated, and a `shaper` that turns the chat answer (whole, or each
    streamed chunk) into their own wire format."""
    services = request[SERVICES]  # one snapshot for the whole request, whatever a reload does meanwhile
    policy = services.sinks.policy
    try:
        if body is None:
            tenant, body = await read_authenticated(request, services.config.limits.max_body_bytes,
                                                    lambda: authenticated(request, policy))
        tenant = tenant or authenticated(request, policy)
    except OpenAIError as refusal:
        await count_refusal(policy, request, tenant, refusal)
        raise
    return await serve(services, Call(request[CTX], tenant, kind, body, headers=request.headers),
                       Delivery(request, shaper))


async def serve(services: Services, call: Call, delivery: Delivery = Delivery(), gate=None) -> web.StreamResponse:
    """parse -> route -> admit -> answer (from the cache, or relay; a fresh answer may be kept) ->
    conclude(outcome), for an authenticated tenant.

    Without `delivery.to` (a batch line) only whole answers are possible. `gate(tier)` is held
    from admission to the end (batch lines: wait for spare capacity on the routed tier). A
    cached answer is served only after authentication, the tenant's policy (the route) and
    admission (rate limits, budgets), like any other."""
    policy, ctx, tenant = services.sinks.policy, call.ctx, call.tenant
    try:
        controls, body = take_controls(call.body, from_headers(call.headers or {}))
        request = build_request(services, call if body is call.body else replace(call, body=body))
        if request.stream and delivery.to is None:
            raise bad_request("'stream' needs a client connection to stream to", param="stream")
        plan = services.cache.plan(request, controls)
    except OpenAIError as refusal:
        await charge_refusal(policy, ctx, tenant, refusal)
        raise
    async with gate(request.route.tier) if gate is not None else nullcontext():
        try:
            with span("admit"):
                admission = await policy.admit(tenant, request.id, request.route.prompt_bound,
                                               request.max_tokens_reserved, n=request.n,
                                               answers=request.answers_billed,
                                               attempts=request.config.failover.max_attempts,
                                               tiers=[t.name for t in request.reach],
                                               client_request_id=ctx.client_request_id, tags=request.tags)
        except OpenAIError as refusal:
            refusal.headers.update(ctx.headers(request.route.tier))
            raise cascade_refusal(refusal, request) from None
        found = await services.cache.find(request, plan) if plan is not None else NOT_FOUND
        if found.entry is not None:
            outcome, sample = await serve_hit(request, found.entry, delivery, found.result), None
            if found.result == SEMANTIC:
                services.sinks.quality.sample_cached(request, found.entry.payloads, found.entry.stream,
                                                     services.cache.semantic.verdicts(tenant.name, plan.semantic))
        else:
            sample = None if call.kind == "embeddings" else services.sinks.quality.begin(request)
            outcome, recorder = await _generate(services, request, plan, delivery, sample)
            if plan is not None and plan.write:  # before conclude: a client gone cancels what follows its settle
                kept = services.cache.keep(request, plan, outcome, recorder, found.probe)
                if kept not in (None, "stored"):
                    metrics.METRICS.cache.labels(tenant.name, request.route.tier.name, kept).inc()
        await conclude(outcome, Admitted(request, admission, sample), services.sinks)
    return outcome.deliver(ctx)


def _both(first, second):
    """One tap for the stream's payloads that feeds both (either may be None)."""
    if first is None or second is None:
        return first or second

    def tap(payload: bytes) -> None:
        first(payload)
        second(payload)
    return tap


async def _generate(services: Services, request: GatewayRequest, plan, delivery: Delivery, sample):
    """Relay the request to a worker; a stream the cache may keep is recorded as it passes."""
    status = None if plan is None else (MISS if plan.read else BYPASS)
    recorder = Recorder(services.cache.settings.max_entry_bytes) if plan and plan.write and request.stream else None
    tap = _both(sample.tap if sample is not None else None, recorder)
    headers = ((CACHE, status),) if status is not None else ()
    outcome = await relay(request, services.upstreams, Delivery(delivery.to, delivery.shaper, tap, headers))
    return (outcome if status is None else replace(outcome, cache=status)), recorder


def cascade_refusal(refusal: OpenAIError, request: GatewayRequest) -> OpenAIError:
    """A budget refusal of a cascaded request says that the cascade's second answer is what did not fit."""
    if refusal.code != "budget_exceeded" or not request.cascade.runs:
        return refusal
    return OpenAIError(refusal.status, f"{refusal.message}; this request cascades (routing.cascade), so its worst "
                                       "case is two answers, the first tier's and the one above: send "
                                       "\"cascade\": false to be admitted for one", param="cascade",
                       code=refusal.code, headers=refusal.headers)


def build_request(services: Services, call: Call) -> GatewayRequest:
    """The one typed request: parsed, routed, and with what it may generate settled once."""
    config, kind = services.config, call.kind
    body, tags = split_tags(call.body, (call.headers or {}).get(TAGS_HEADER))  # metadata never reaches a worker
    parsed = parse(kind, body)
    if kind == "embeddings":
        route = plan_embeddings_route(config, call.tenant, parsed)
        max_tokens, stream, include_usage = 0, False, False
    else:
        max_tokens = max_tokens_asked(parsed, config)
        route = plan_route(services.router, config, call.tenant, parsed, body, max_tokens)
        stream, include_usage = parsed.params.stream, parsed.params.include_usage
    if call.priority is not None:
        route = replace(route, decision=replace(route.decision, priority=call.priority))
    cascade = NOT_ASKED if kind == "embeddings" else plan_request_cascade(
        config, services.router, call.tenant, parsed, route, max_tokens_on(max_tokens, route.decision,
                                                                                        route.tier))
    return GatewayRequest(call.ctx, kind, call.tenant, parsed, body, route, config, max_tokens, stream,
                          include_usage, tags, cascade)


async def count_refusal(policy, request: web.Request, tenant, refusal: OpenAIError) -> None:
    """`charge_refusal` for an HTTP request whose tenant may not be known yet."""
    if tenant is None:
        try:
            tenant = authenticated(request, policy)
        except OpenAIError:
            return  # no tenant to count it against
    await charge_refusal(policy, request[CTX], tenant, refusal)


async def charge_refusal(policy, ctx: RequestContext, tenant, refusal: OpenAIError) -> None:
    """A refused request still counts against its tenant's request rate, so a flood of bad
    requests is limited like any other: past the limit its 429 replaces the refusal."""
    if refusal.status in (401, 429) or refusal.status >= 500:
        return
    try:
        await policy.admit(tenant, ctx.request_id, 0, 0)
    except OpenAIError as limit:
        if limit.status == 429:
            raise limit from None


async def list_models(request: web.Request) -> web.Response:
    """Every name a client may send, and for each the endpoints that serve it."""
    services = request[SERVICES]
    config = services.config
    services.sinks.policy.authenticate(request.headers.get("Authorization"))
    entries = [_model(AUTO, {"kind": "auto", "endpoints": list(ENDPOINTS["generate"])})]
    for tier in (*config.tiers, *config.embedding_tiers):
        entries.append(_model(tier.name, {"kind": "tier", "task": tier.task, "model": tier.model, "level": tier.level,
                                          "endpoints": list(ENDPOINTS[tier.task]),
                                          "price_per_mtok": {"input": tier.price_per_mtok.input,
                                                             "output": tier.price_per_mtok.output}}))
    for model in dict.fromkeys(t.model for t in (*config.tiers, *config.embedding_tiers)):
        if model not in {e["id"] for e in entries}:
            tier = config.tier(config.resolve_model(model)) or config.embedding_tier(model)
            entries.append(_model(model, {"kind": "model", "tier": tier.name, "endpoints": list(ENDPOINTS[tier.task])}))
    for alias, target in config.aliases.items():
        tier = config.tier(target)
        entries.append(_model(alias, {"kind": "alias", "target": target,
                                      "endpoints": list(ENDPOINTS[tier.task if tier else "generate"])}))
    return web.json_response({"object": "list", "data": entries})


def _model(name: str, about: dict) -> dict:
    return {"id": name, "object": "model", "created": 0, "owned_by": "tiergate", "tiergate": about}


async def health(request: web.Request) -> web.Response:
    """Liveness for anyone (probes); the workers behind it only for the admin key (admin_view.py)."""
    services = request[SERVICES]
    if not sees_everything(request, services):
        return web.json_response({"status": "ok"})
    now = time.monotonic()
    backends = {b.url: {"healthy": b.healthy, "breaker": b.breaker_state(now), "outstanding": b.outstanding}
                for b in services.upstreams.pools.backends.values()}
    return web.json_response({"status": "ok", "pid": os.getpid(), "classifier": services.router.classifiers.current.name, "backends": backends})


async def metrics_endpoint(request: web.Request) -> web.Response:
    """Per-tenant series only for the admin key (admin_view.py): the rest for any scraper."""
    body, content_type = metrics.render(with_tenants=sees_everything(request, request[SERVICES]))
    return web.Response(body=body, headers={"Content-Type": content_type})


async def usage(request: web.Request) -> web.Response:
    """The calling tenant's usage (all tenants for the admin key), when policies are configured."""
    services = request[SERVICES]
    policy = services.sinks.policy
    tenant = authenticated(request, policy, bearer_only=True)
    if isinstance(policy, OpenPolicy):
        raise OpenAIError(404, "usage accounting needs a 'tenants' section in the config", code="not_found")
    await policy.count_request(tenant, request[CTX].request_id)
    days = request.query.get("days", "7")
    if not days.isdigit() or not 1 <= int(days) <= 366:
        raise OpenAIError(400, "'days' must be an integer from 1 to 366", param="days", code="invalid_value")
    group_by = request.query.get("group_by", "tier")
    if group_by not in ("tier", "tag"):
        raise OpenAIError(400, "'group_by' must be 'tier' or 'tag'", param="group_by", code="invalid_value")
    return web.json_response(await policy.usage(tenant, days=int(days), by_tag=group_by == "tag"))
