"""HTTP handlers for the OpenAI endpoints, the dry-run route, models, health and metrics."""
from __future__ import annotations

import os
import time
from contextlib import nullcontext
from dataclasses import replace

from aiohttp import web

from wire.embeddings import parse_embeddings
from webwire.errors import read_json_object
from webwire.tracing import span, traced
from wire.errors import OpenAIError, bad_request
from wire.requests import parse_chat, parse_completion

from . import metrics
from .config import AUTO
from .embeddings_route import plan_embeddings_route
from .finish import Admitted, Sinks, finish
from .policy_seam import OpenPolicy
from .relay import relay
from .routing import plan_route
from .upstream import choose

STATE = web.AppKey("tiergate_state", object)
CTX = web.RequestKey("tiergate_ctx", object)
# The endpoints that serve each kind of tier (a tier's `task`); what /v1/models tells clients.
ENDPOINTS = {"generate": ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"),
             "embed": ("/v1/embeddings",)}
PARSERS = {"chat": parse_chat, "completion": parse_completion, "embeddings": parse_embeddings}


async def read_body(request: web.Request, limit: int) -> dict:
    if request.content_length is not None and request.content_length > limit:
        raise OpenAIError(413, f"request body is larger than {limit} bytes", code="request_too_large")
    body = await read_json_object(request)
    if len(await request.read()) > limit:  # chunked uploads carry no Content-Length (read() is cached)
        raise OpenAIError(413, f"request body is larger than {limit} bytes", code="request_too_large")
    return body


@traced("parse")
def _parse(kind: str, body: dict):
    return PARSERS[kind](body)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await generate(request, "chat")


async def completions(request: web.Request) -> web.StreamResponse:
    return await generate(request, "completion")


async def embeddings(request: web.Request) -> web.StreamResponse:
    return await generate(request, "embeddings")


async def generate(request: web.Request, kind: str, *, body: dict | None = None, tenant=None,
                   shaper=None) -> web.StreamResponse:
    """An HTTP request on the one request path: read the body, authenticate, then `serve`.

    Translating endpoints (/v1/responses, /v1/messages) pass an already translated chat `body`,
    the `tenant` they authenticated, and a `shaper` that turns the chat answer (whole, or each
    streamed chunk) into their own wire format."""
    state = request.app[STATE]
    config = state.config  # one snapshot for the whole request, whatever a reload does meanwhile
    try:
        if body is None:
            body = await read_body(request, config.limits.max_body_bytes)
        tenant = tenant or state.policy.authenticate(request.headers.get("Authorization"))
    except OpenAIError as refusal:
        await count_refusal(state.policy, request, tenant, refusal)
        raise
    return await serve(state, config, request[CTX], tenant, kind, body, client=request, shaper=shaper)


async def serve(state, config, ctx, tenant, kind: str, body: dict, *, client: web.Request | None = None,
                shaper=None, priority: str | None = None, gate=None) -> web.StreamResponse:
    """parse -> route -> admit -> relay -> finish(outcome), for an authenticated tenant.

    `client` is the HTTP request a stream is written to; without one (a batch line) only whole
    answers are possible. `priority` overrides the tenant's, and `gate(tier)` is held from
    admission to the end (batch lines: wait for spare capacity on the routed tier)."""
    policy = state.policy
    embedding = kind == "embeddings"
    ctx.tenant = tenant.name
    try:
        parsed = _parse(kind, body)
        route = plan_embeddings_route(state, config, tenant, parsed) if embedding else \
            plan_route(state, config, tenant, parsed, body)
    except OpenAIError as refusal:
        await charge_refusal(policy, ctx, tenant, refusal)
        raise
    if priority is not None:
        route = replace(route, decision=replace(route.decision, priority=priority))
    ctx.tier, ctx.model = route.tier.name, route.tier.model
    stream = not embedding and parsed.params.stream
    if stream and client is None:
        raise bad_request("'stream' needs a client connection to stream to", param="stream")
    async with gate(route.tier) if gate is not None else nullcontext():
        max_tokens = 0 if embedding else parsed.params.max_tokens or config.limits.default_max_tokens
        cap = route.decision.max_tokens_cap
        with span("admit"):
            admission = await policy.admit(tenant, ctx.request_id, route.estimated_prompt_tokens,
                                           min(max_tokens, cap) if cap else max_tokens)
        sample = None if embedding else state.quality.begin(config, route, tenant, ctx.request_id, kind, body)
        outcome = await relay(client, state, config, ctx, route, kind, body, stream=stream,
                              include_usage=not embedding and parsed.params.include_usage, shaper=shaper,
                              tap=sample.tap if sample is not None else None)
        await finish(outcome, Admitted(ctx, route, admission, sample),
                     Sinks(config, policy, state.activity, state.quality))
    return outcome.deliver()


async def count_refusal(policy, request: web.Request, tenant, refusal: OpenAIError) -> None:
    """`charge_refusal` for an HTTP request whose tenant may not be known yet."""
    if tenant is None:
        try:
            tenant = policy.authenticate(request.headers.get("Authorization"))
        except OpenAIError:
            return  # no tenant to count it against
    await charge_refusal(policy, request[CTX], tenant, refusal)


async def charge_refusal(policy, ctx, tenant, refusal: OpenAIError) -> None:
    """A refused request still counts against its tenant's request rate, so a flood of bad
    requests is limited like any other: past the limit its 429 replaces the refusal."""
    if refusal.status in (401, 429) or refusal.status >= 500:
        return
    ctx.tenant = tenant.name
    try:
        await policy.admit(tenant, ctx.request_id, 0, 0)
    except OpenAIError as limit:
        if limit.status == 429:
            raise limit from None


async def route_dry_run(request: web.Request) -> web.Response:
    """The decision for a request, without generating: every step, routed_by, the chosen worker."""
    state = request.app[STATE]
    config = state.config
    body = await read_body(request, config.limits.max_body_bytes)
    tenant = state.policy.authenticate(request.headers.get("Authorization"))
    return web.json_response(await explain_route(state, config, tenant, body, request[CTX]))


async def explain_route(state, config, tenant, body: dict, ctx) -> dict:
    """/v1/route's answer for `body` as `tenant` would send it (the console's explorer uses it too)."""
    parsed = _parse("chat" if "messages" in body else "completion", body)
    ctx.tenant = tenant.name
    route = plan_route(state, config, tenant, parsed, body, explain=True)
    pick, keys = await choose(state, config, route, route.tier, set())
    ctx.tier, ctx.model = route.tier.name, route.tier.model
    ctx.backend = pick.backend.label if pick else "none"
    c, decision = route.classification, route.decision
    return {
        "object": "tiergate.route",
        "requested_model": route.requested_model,
        "tier": route.tier.name,
        "model": route.tier.model,
        "routed_by": decision.routed_by.value,
        "classifier": {"name": c.classifier, "tier": c.tier, "scores": c.scores} if c else None,
        "steps": decision.explain(),
        "capabilities": state.capabilities[route.tier.name].as_dict(),
        "priority": decision.priority,
        "max_tokens_cap": decision.max_tokens_cap,
        "backend": pick.backend.url if pick else None,
        "affinity": (pick.affinity if keys else "none") if pick else None,
        "tenant": tenant.name,
    }


async def list_models(request: web.Request) -> web.Response:
    """Every name a client may send, and for each the endpoints that serve it."""
    state = request.app[STATE]
    config = state.config
    state.policy.authenticate(request.headers.get("Authorization"))
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
    state = request.app[STATE]
    now = time.monotonic()
    backends = {b.url: {"healthy": b.healthy, "breaker": b.breaker_state(now), "outstanding": b.outstanding}
                for b in state.pools.backends.values()}
    return web.json_response({"status": "ok", "pid": os.getpid(), "classifier": state.classifier.name, "backends": backends})


async def metrics_endpoint(request: web.Request) -> web.Response:
    body, content_type = metrics.render()
    return web.Response(body=body, headers={"Content-Type": content_type})


async def usage(request: web.Request) -> web.Response:
    """The calling tenant's usage (all tenants for the admin key), when policies are configured."""
    state = request.app[STATE]
    policy = state.policy
    tenant = policy.authenticate(request.headers.get("Authorization"))
    request[CTX].tenant = tenant.name
    if isinstance(policy, OpenPolicy):
        raise OpenAIError(404, "usage accounting needs a 'tenants' section in the config", code="not_found")
    days = request.query.get("days", "7")
    if not days.isdigit() or not 1 <= int(days) <= 366:
        raise OpenAIError(400, "'days' must be an integer from 1 to 366", param="days", code="invalid_value")
    return web.json_response(await policy.usage(tenant, days=int(days)))
