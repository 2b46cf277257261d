"""The request as the path sees it: its JSON body (read within the size limit by `body.py`)
parsed for its kind, and built once by `handlers.serve` into a frozen `GatewayRequest` that every later step
reads and none writes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policies.decision import Decision
from webwire.tracing import traced
from wire.embeddings import EmbeddingsRequest, parse_embeddings
from wire.requests import ChatRequest, CompletionRequest, parse_chat, parse_completion

from ..config import Config, Tier
from .cascade import NOT_ASKED, CascadePlan
from .context import RequestContext
from .routing import Route
from .shape_check import structured_schema

PARSERS = {"chat": parse_chat, "completion": parse_completion, "embeddings": parse_embeddings}


@traced("parse")
def parse(kind: str, body: dict) -> ChatRequest | CompletionRequest | EmbeddingsRequest:
    """The validated request of `kind` (chat, completion or embeddings), or a 400 naming the field."""
    return PARSERS[kind](body)


def max_tokens_asked(parsed: ChatRequest | CompletionRequest, config: Config) -> int:
    """What a generation request may generate before any cap: its own max_tokens (chat's
    max_completion_tokens first, as the parser reads them) or the configured default."""
    return parsed.params.max_tokens or config.limits.default_max_tokens


def max_tokens_on(requested: int, decision: Decision, tier: Tier) -> int:
    """The one max_tokens rule: what the client asked for (or the configured default), capped by
    the tenant's policy and by the tier. Admission reserves it and the tier's worker gets it."""
    caps = [c for c in (decision.max_tokens_cap, tier.max_tokens_cap) if c]
    return min(requested, *caps) if caps else requested


@dataclass(frozen=True, slots=True)
class Call:
    """An authenticated request as it arrives at `handlers.serve`: its context, the tenant, the
    kind (chat, completion or embeddings), its JSON body, a priority that overrides the
    tenant's (batch lines), and the headers that may carry cache controls."""
    ctx: RequestContext
    tenant: Any
    kind: str
    body: dict
    priority: str | None = None
    headers: Any = None  # the HTTP request's headers (the cache controls); None for a batch line


@dataclass(frozen=True, slots=True)
class GatewayRequest:
    ctx: RequestContext  # id, start time, trace span
    kind: str            # chat, completion or embeddings
    tenant: Any          # the policy's tenant (policies.keys.Tenant, or the open policy's anonymous one)
    parsed: ChatRequest | CompletionRequest | EmbeddingsRequest
    body: dict           # the client's JSON: each tier's own body is built from it (upstream.Ask)
    route: Route
    config: Config       # the snapshot this request runs under, whatever a reload does meanwhile
    max_tokens: int      # asked for, or the configured default; 0 for embeddings
    stream: bool
    include_usage: bool  # the client asked for the usage chunk of a stream
    tags: tuple[str, ...] = ()  # cost-attribution tags asked for (the policy keeps the tenant's allowed ones)
    cascade: CascadePlan = NOT_ASKED  # whether the routed tier's answer may be re-asked one tier up (cascade.py)

    @property
    def id(self) -> str:
        return self.ctx.request_id

    @property
    def n(self) -> int:
        """Choices the request asks for (embeddings: one)."""
        return 1 if self.kind == "embeddings" else self.parsed.params.n

    @property
    def reach(self) -> tuple[Tier, ...]:
        """Every tier that may serve it: its own, and the route's escalation path (failover or a
        shape re-ask climb only along it: the tenant's usable tiers that can serve the request)."""
        return (self.route.tier, *self.route.escalation_path)

    @property
    def answers_billed(self) -> int:
        """At most how many answers it may be billed: one, one more when a shape re-ask may replace
        a whole structured answer, and one more when a cascade may (the dropped ones are billed too)."""
        reaskable = (not self.stream and self.route.decision.structured_escalation and len(self.reach) > 1
                     and structured_schema(self.body) is not None)
        return 1 + reaskable + self.cascade.runs

    @property
    def max_tokens_reserved(self) -> int:
        """The most it may generate per choice on any tier it may reach: what admission reserves."""
        if self.kind == "embeddings":
            return 0
        return max(max_tokens_on(self.max_tokens, self.route.decision, t) for t in self.reach)
