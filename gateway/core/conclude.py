"""After the answer: `conclude(outcome)` does everything that follows it in one place and this
order:

1. give the upstream connection back (pooled when the answer completed, closed when it was
   cut: closing is what tells the worker to stop generating);
2. metrics: tokens, latency, TTFT and time per output token;
3. cost, the top-tier counterfactual and why the tier was chosen (accounting.py);
4. the console's activity counters (in memory; flushed once a second);
5. the quality monitor's sample (queued; never waited on);
6. settle the tenant's admission in Redis, shielded so a client disconnect cannot skip billing.

The `Outcome` (relay.py) is final when it arrives here; conclude reads it and writes nothing back.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, is_dataclass, replace
from typing import Any

from policies.service import PolicyService as TenantPolicies
from webwire.tracing import traced

from policies.costs import TierPrice, tier_price

from .accounting import Accounted, publish_spend, record_cost, record_hit, record_request
from ..console.activity import ActivityLog, Served
from .context import SERVED_FROM_CACHE, RequestContext
from .metrics import METRICS
from .policy_seam import OpenPolicy, PolicyService
from ..quality.monitor import QualityMonitor
from ..quality.sample import Sample
from .relay import Outcome
from .request import GatewayRequest
from .trace_spans import annotate

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Admitted:
    """The request conclude() closes: the request, its admission and its quality sample (if drawn)."""
    request: GatewayRequest
    admission: Any  # the policy's own token, handed back to it on settle
    sample: Sample | None


@dataclass(frozen=True, slots=True)
class Sinks:
    """Everything conclude() reports to, and nothing else of the process state. `policy` is the
    request's own snapshot: a reload meanwhile does not change it."""
    policy: PolicyService
    activity: ActivityLog
    quality: QualityMonitor


@traced("finish")
async def conclude(outcome: Outcome, admitted: Admitted, sinks: Sinks) -> None:
    request, opened = admitted.request, outcome.opened
    route, ctx, tenant = request.route, request.ctx, request.tenant.name
    annotate(request, outcome)
    if opened is not None:
        opened.backend.on_done()
        if outcome.cut:
            opened.response.close()
        else:
            opened.response.release()
    hit = outcome.cache in SERVED_FROM_CACHE
    if outcome.cache is not None:
        METRICS.cache.labels(tenant, route.tier.name, outcome.cache).inc()
    if hit:  # a worker's latency and tokens are not the cache's
        accounted = record_hit(request.config, tenant, outcome.served, outcome.usage, hit_price(request))
    else:
        _observe(ctx, tenant, outcome)
        accounted = record_request(request.config, tenant, route, outcome)
    for other in outcome.other_attempts:
        record_cost(tenant, other.tier, other.usage.prompt_tokens, other.usage.completion_tokens)
    if outcome.cascade is not None:
        _count_cascade(outcome.cascade)
    if sinks.activity.enabled:
        sinks.activity.record(_served(request, outcome, accounted))
    if admitted.sample is not None:
        sinks.quality.submit(admitted.sample, outcome)
    if not isinstance(sinks.policy, OpenPolicy):  # the open policy keeps no ledger: nothing to settle
        await asyncio.shield(_settle(sinks.policy, admitted.admission, request, outcome))


async def _settle(policy: PolicyService, admission, request: GatewayRequest, outcome: Outcome) -> None:
    usage = outcome.usage
    cascade = {"cascade": outcome.cascade.logged} if outcome.cascade is not None else {}  # the usage log's field
    try:
        for other in outcome.other_attempts:  # first, while the reservation still holds their share
            await policy.settle(_uncharged(admission), other.attempt_id, other.tier.name,
                                other.usage.prompt_tokens, other.usage.completion_tokens,
                                usage_source=other.usage.source, **cascade)
        await policy.settle(admission, outcome.attempt_id, outcome.served.name, usage.prompt_tokens,
                            usage.completion_tokens, usage_source=usage.source,
                            price=hit_price(request) if outcome.cache in SERVED_FROM_CACHE else None, **cascade)
        if isinstance(policy, TenantPolicies):  # a test's own policy has no spend to publish
            publish_spend(policy, request.tenant.name)
    except Exception:  # settle failures are the policy's to report; the answer already left
        log.exception("settle failed for request %s (client request id %s)", request.id,
                      request.ctx.client_request_id or "none")


def hit_price(request: GatewayRequest) -> TierPrice:
    """What the tenant pays for an answer served from the response cache (its cache policy's price)."""
    policy = getattr(request.tenant, "policy", None) or request.config.policies.defaults
    return tier_price(policy.cache)


def _uncharged(admission):
    """The admission for another attempt's bill: it corrects no token charge and releases no
    reservation (the answer's own settle, last, does both)."""
    return replace(admission, charged_tokens=0, request_id="") if is_dataclass(admission) else admission


def _count_cascade(verdict) -> None:
    METRICS.cascade.labels(verdict.first_tier, verdict.outcome, verdict.reason).inc()
    if verdict.held_s is not None:
        METRICS.cascade_held.labels(verdict.first_tier, verdict.outcome).observe(verdict.held_s)


def _count_tokens(tenant: str, tier, usage) -> None:
    if usage.prompt_tokens or usage.completion_tokens:
        METRICS.tokens.labels(tenant, tier.name, tier.model, "in").inc(usage.prompt_tokens)
        METRICS.tokens.labels(tenant, tier.name, tier.model, "out").inc(usage.completion_tokens)


def _observe(ctx: RequestContext, tenant: str, outcome: Outcome) -> None:
    tier, usage = outcome.served, outcome.usage
    _count_tokens(tenant, tier, usage)
    for other in outcome.other_attempts:
        _count_tokens(tenant, other.tier, other.usage)
    now = time.perf_counter()
    METRICS.e2e.labels(tier.name, tier.model).observe(now - ctx.start)
    if usage.first_token_at:
        METRICS.ttft.labels(tier.name, tier.model).observe(usage.first_token_at - ctx.start)
        if outcome.stream and usage.completion_tokens > 1:
            METRICS.tpot.labels(tier.name, tier.model).observe(
                (now - usage.first_token_at) / (usage.completion_tokens - 1))


def _served(request: GatewayRequest, outcome: Outcome, accounted: Accounted | None) -> Served:
    route, ctx = request.route, request.ctx
    c, usage = route.classification, outcome.usage
    return Served(kind=outcome.kind, tenant=request.tenant.name, requested_model=route.requested_model,
                  tier=outcome.served.name, reason=accounted.reason if accounted else None,
                  scores=c.scores if c else None, latency_ms=(time.perf_counter() - ctx.start) * 1000.0,
                  prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                  cost_micro=accounted.cost_micro if accounted else 0,
                  top_cost_micro=accounted.top_cost_micro if accounted else 0,
                  request_id=request.id, prompt=route.prompt_text or None)
