"""/v1/route: the decision for a request without generating it (the console's explorer asks too)."""
from __future__ import annotations

from aiohttp import web

from policies.decision_types import StepKind

from ..admin.view import sees_everything
from ..core.authenticated import authenticated
from ..core.context import CTX, RequestContext
from ..core.body import read_authenticated
from ..core.cascade import plan_request_cascade
from ..core.request import max_tokens_asked, max_tokens_on, parse
from ..core.routing import plan_route
from ..core.services import Services
from ..config import TENANT_SCOPE
from ..core.services import SERVICES
from ..core.upstream import choose


async def route_dry_run(request: web.Request) -> web.Response:
    """Every step of the decision, routed_by, and the worker that would be chosen."""
    services = request[SERVICES]
    tenant, body = await read_authenticated(request, services.config.limits.max_body_bytes,
                                            lambda: authenticated(request, services.sinks.policy))
    await services.sinks.policy.count_request(tenant, request[CTX].request_id)
    about, headers = await explain_route(services, tenant, body, request[CTX], sees_everything(request, services))
    return web.json_response(about, headers=headers)


async def explain_route(services: Services, tenant, body: dict, ctx: RequestContext,
                        admin: bool = True) -> tuple[dict, dict[str, str]]:
    """/v1/route's answer for `body` as `tenant` would send it, and the headers it carries. A tenant's
    (`admin` False) names the worker instead of its URL, and with `affinity.scope: global` withholds
    the affinity outcome: there the index holds every tenant's prefixes."""
    config = services.config
    parsed = parse("chat" if "messages" in body else "completion", body)
    max_tokens = max_tokens_asked(parsed, config)
    route = plan_route(services.router, config, tenant, parsed, body, max_tokens, explain=True)
    cascade = plan_request_cascade(config, services.router, tenant, parsed, route,
                                   max_tokens_on(max_tokens, route.decision, route.tier))
    pick, keys = await choose(services.upstreams, config, route, route.tier, set())
    c, decision = route.classification, route.decision
    about = {
        "object": "tiergate.route",
        "requested_model": route.requested_model,
        "tier": route.tier.name,
        "model": route.tier.model,
        "routed_by": decision.routed_by.value,
        "classifier": _classifier(c),
        "p_good": _by_level(c.p_good) if c and c.p_good else None,
        "quality": _quality(c, decision, route.tier.level),
        "steps": decision.explain(),
        "capabilities": services.router.capabilities[route.tier.name].as_dict(),
        "priority": decision.priority,
        "max_tokens_cap": decision.max_tokens_cap,
        "backend": (pick.backend.url if admin else pick.backend.label) if pick else None,
        "affinity": _affinity(pick, keys, admin or config.affinity.scope == TENANT_SCOPE),
        "tenant": tenant.name,
        "cascade": _cascade(cascade, route.tier),
    }
    return about, ctx.headers(route.tier, pick.backend.label if pick else "none")


def _affinity(pick, keys: list[str], may_see: bool) -> str | None:
    if pick is None:
        return None
    if not may_see:
        return "withheld"
    return pick.affinity if keys else "none"


def _cascade(plan, tier) -> dict:
    """Whether a cascade would run: from which tier to which, at what threshold, or why not."""
    if not plan.asked:
        return {"runs": False, "reason": "not_asked"}
    about = {"runs": plan.runs, "from": tier.name, "to": plan.upper.name if plan.upper else None}
    if plan.runs:
        return {**about, "threshold": plan.threshold, "threshold_source": plan.provenance,
                "hold_tokens": plan.hold_tokens}
    return {**about, "reason": plan.reason}


def _by_level(values: list[float]) -> dict[str, float]:
    return {str(level): round(v, 4) for level, v in enumerate(values, start=1)}


def _quality(c, decision, level: int) -> dict | None:
    """The decision as the gain it forgoes: at the chosen level, the expected share of requests the top
    tier would answer right and this one wrong, against the threshold it met. Only this request's own
    figures: never neighbours, past prompts or other tenants' anything."""
    if c is None or c.need is None:
        return None
    step = next((s.detail for s in decision.steps if s.kind == StepKind.THRESHOLDS), {})
    threshold = step.get("effective", {}).get(level + 1) if level < len(c.need) else None
    return {"expected_gain_by_level": _by_level(c.need), "expected_gain_forgone": round(c.need[level - 1], 4),
            "threshold": round(threshold, 4) if threshold is not None else None,
            "quality_target": step.get("quality_target"), "target_calibrated": bool(c.target_thresholds),
            "learned_from_outcomes": any(c.evidence or ()) or bool(c.target_thresholds)}


def _classifier(c) -> dict | None:
    """The classifier's level and scores; with outcome models, its own scores and the evidence behind p_good."""
    if c is None:
        return None
    about = {"name": c.classifier, "tier": c.tier, "scores": c.scores}
    if c.p_good is not None:
        about.update(prior_scores=c.prior, evidence=_by_level(c.evidence))
    return about
