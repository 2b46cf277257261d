"""After the answer: one typed Outcome, and `finish` that does everything that follows it in
one place and this order:

1. give the upstream connection back (pooled when the answer completed, closed when it was
   cut: closing is what tells the worker to stop generating);
2. count a cut stream's tokens (what was streamed, the estimated prompt);
3. metrics: tokens, latency, TTFT and time per output token;
4. cost, the top-tier counterfactual and why the tier was chosen (accounting.py);
5. the console's activity counters (in memory; flushed once a second);
6. the quality monitor's sample (queued; never waited on);
7. settle the tenant's admission in Redis, shielded so a client disconnect cannot skip billing.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from .accounting import Accounted, publish_spend, record_request
from .config import Config, Tier
from .console.activity import Served
from .metrics import METRICS
from .relay import StreamRelay, Usage
from .upstream import Opened

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What one request's attempt to answer came to."""
    kind: str              # chat, completion or embeddings
    stream: bool
    served: Tier           # the tier that answered (the routed one when none did)
    opened: Opened | None  # the upstream attempt that answered, None when none did
    relay: StreamRelay | None  # the relay of a streamed answer
    usage: Usage

    @property
    def cut(self) -> bool:
        """A stream that ended before the upstream finished it (client gone, upstream cut)."""
        return self.relay is not None and not self.relay.completed


def outcome_of(config: Config, ctx, route, kind: str, stream: bool, opened: Opened | None,
               relay: StreamRelay | None, usage: Usage) -> Outcome:
    # the answering attempt knows its tier; when none answered, the last tier tried (ctx) is billed at 0
    served = opened.tier if opened is not None else config.tier(ctx.tier) or route.tier
    return Outcome(kind, stream, served, opened, relay, usage)


async def finish(state, config: Config, policy, ctx, route, admission, sample, outcome: Outcome) -> None:
    """`config` and `policy` are the request's own snapshots: a reload meanwhile changes neither."""
    opened, usage = outcome.opened, outcome.usage
    if opened is not None:
        opened.backend.on_done()
        if outcome.cut:
            opened.response.close()
        else:
            opened.response.release()
    if outcome.relay is not None and not usage.reported:  # client went away mid-stream
        usage.prompt_tokens, usage.completion_tokens = route.estimated_prompt_tokens, outcome.relay.chunks
    _observe(ctx, outcome)
    accounted = record_request(config, ctx, route, outcome.served, usage, opened)
    if state.activity.enabled:
        state.activity.record(_served(ctx, route, outcome, accounted))
    if sample is not None:
        state.quality.finish(sample, opened, outcome.relay)
    await asyncio.shield(_settle(policy, admission, ctx, outcome.served.name, usage))


async def _settle(policy, admission, ctx, tier_name: str, usage: Usage) -> None:
    try:
        await policy.settle(admission, ctx.request_id, tier_name, usage.prompt_tokens, usage.completion_tokens)
        publish_spend(policy, ctx.tenant)
    except Exception:  # settle failures are the policy's to report; the answer already left
        log.exception("settle failed for request %s", ctx.request_id)


def _observe(ctx, outcome: Outcome) -> None:
    tier, usage = outcome.served, outcome.usage
    if usage.prompt_tokens or usage.completion_tokens:
        METRICS.tokens.labels(ctx.tenant, tier.name, tier.model, "in").inc(usage.prompt_tokens)
        METRICS.tokens.labels(ctx.tenant, tier.name, tier.model, "out").inc(usage.completion_tokens)
    now = time.perf_counter()
    METRICS.e2e.labels(tier.name, tier.model).observe(now - ctx.start)
    if usage.first_token_at:
        METRICS.ttft.labels(tier.name, tier.model).observe(usage.first_token_at - ctx.start)
        if outcome.stream and usage.completion_tokens > 1:
            METRICS.tpot.labels(tier.name, tier.model).observe(
                (now - usage.first_token_at) / (usage.completion_tokens - 1))


def _served(ctx, route, outcome: Outcome, accounted: Accounted | None) -> Served:
    c, usage = route.classification, outcome.usage
    return Served(kind=outcome.kind, tenant=ctx.tenant, requested_model=route.requested_model,
                  tier=outcome.served.name, reason=accounted.reason if accounted else None,
                  scores=c.scores if c else None, latency_ms=(time.perf_counter() - ctx.start) * 1000.0,
                  prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                  cost_micro=accounted.cost_micro if accounted else 0,
                  top_cost_micro=accounted.top_cost_micro if accounted else 0,
                  request_id=ctx.request_id, prompt=route.prompt_text or None)
