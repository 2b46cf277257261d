"""The cascade's plan and verdict: whether a request cascades (the tenant's `routing.cascade` and
the request's `cascade` field), how sure the first tier is of its answer (its token logprobs, read
by classifier/cascade_confidence.py), and what the client and the logs are told about it.

The routed tier answers first with logprobs; below the tenant's threshold the next usable tier up
(the route's escalation path: allowed tiers, max_tier, capabilities) is asked once and its answer
returned. Both answers are billed. docs/routing.md, "Cascade: configuration"."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from classifier.cascade_confidence import answer_confidence
from policies.routing_policy import CascadePolicy
from policies.decision_types import RoutedBy
from wire.errors import OpenAIError

from ..config import Tier
from .routing import Route

CASCADE = "x-tiergate-cascade"  # kept, escalated or skipped, with the reason and the confidence
HELD = "x-tiergate-cascade-held-ms"  # a cascaded stream: how much later its first token left the gateway
KEPT, ESCALATED, SKIPPED = "kept", "escalated", "skipped"
# Every reason a verdict may give (the metric's label values stay bounded).
REASONS = ("confident", "low_confidence", "no_logprobs", "upper_unavailable", "no_higher_tier",
           "explicit_model", "pinned", "tier_without_logprobs", "upstream_error")


@dataclass(frozen=True, slots=True)
class LiveThreshold:
    """A tenant's threshold calibrated on its own verdicts (gateway/quality/cascade_learning.py)."""
    threshold: float
    verdicts: int   # how many it was calibrated on
    at_ms: int      # when the guard accepted it

    def provenance(self) -> dict:
        return {"source": "calibrated", "verdicts": self.verdicts, "at_ms": self.at_ms}


STATIC = {"source": "static"}


@dataclass(frozen=True, slots=True)
class CascadePlan:
    """What a request's cascade will do, settled once when the request is built."""
    runs: bool = False
    reason: str = ""          # why it is skipped (runs False but asked)
    asked: bool = False       # the tenant or the request turned it on: the answer says what it came to
    threshold: float = 0.0
    hold_tokens: int = 0      # a stream holds back this many of the first tier's tokens before deciding
    strip_logprobs: bool = False  # the gateway asked for the logprobs, not the client: they are dropped
    upper: Tier | None = None  # where a low-confidence answer is re-asked (from the routed tier)
    calibrated: LiveThreshold | None = None  # where `threshold` came from: None, the tenant's policy

    @property
    def provenance(self) -> dict:
        return self.calibrated.provenance() if self.calibrated is not None else STATIC

    def skipped(self, first_tier: Tier) -> "CascadeVerdict | None":
        return CascadeVerdict(SKIPPED, self.reason, first_tier.name) if self.asked and not self.runs else None


NOT_ASKED = CascadePlan()


@dataclass(frozen=True, slots=True)
class CascadeVerdict:
    outcome: str                      # kept, escalated or skipped
    reason: str                       # one of REASONS
    first_tier: str                   # the tier that answered first
    confidence: float | None = None   # the first answer's, when it had logprobs
    held_s: float | None = None       # a stream's added time to first token

    @property
    def logged(self) -> str:
        """The usage log's `cascade` field."""
        return f"{self.outcome}:{self.reason}"

    def headers(self) -> dict[str, str]:
        value = f"{self.outcome}; reason={self.reason}"
        if self.confidence is not None:
            value += f"; confidence={self.confidence:.4f}"
        headers = {CASCADE: value}
        if self.held_s is not None:
            headers[HELD] = f"{self.held_s * 1000.0:.3f}"
        return headers


def plan_request_cascade(config, router, tenant, parsed, route: Route, max_tokens: int) -> CascadePlan:
    """plan_cascade under the tenant's policy (the open policy's defaults without tenants) and its
    calibrated threshold, read from the quality monitor's in-memory snapshot; `max_tokens` is what
    the routed tier may generate."""
    policy = getattr(tenant, "policy", None) or config.policies.defaults
    return plan_cascade(policy.routing.cascade, parsed.params.cascade, route, router.capabilities,
                        parsed.params.surface.logprobs, max_tokens, lambda: router.quality.cascade_threshold(tenant.name))


def plan_cascade(policy: CascadePolicy, asked: bool | None, route: Route, capabilities: dict,
                 client_logprobs: bool, max_tokens: int,
                 live_of: Callable[[], LiveThreshold | None] = lambda: None) -> CascadePlan:
    """The plan for one routed request. A request may turn the cascade off, or on where the
    tenant's mode allows it; a request asking for it under mode `off` is refused by name. The
    threshold `live_of()` reads (only for a request that cascades) replaces the policy's unless
    the policy turned calibration off."""
    if policy.mode == "off":
        if asked:
            raise OpenAIError(403, "'cascade' is turned off by this tenant's policy (routing.cascade.mode: off)",
                              param="cascade", code="cascade_not_allowed")
        return NOT_ASKED
    if not (asked if asked is not None else policy.mode == "on"):
        return NOT_ASKED
    hold = max_tokens if max_tokens <= policy.hold_whole_max_tokens else policy.hold_tokens
    upper = route.next_up(route.tier)
    live = live_of() if policy.calibrate else None
    threshold = live.threshold if live is not None else policy.threshold
    plan = CascadePlan(True, "", True, threshold, hold, not client_logprobs, upper, live)
    routed_by = route.decision.routed_by
    known = capabilities.get(route.tier.name)
    why = ("explicit_model" if routed_by is RoutedBy.EXPLICIT else "pinned" if routed_by is RoutedBy.PINNED
           else "no_higher_tier" if upper is None
           else "tier_without_logprobs" if known is not None and known.logprobs is False else "")
    return CascadePlan(False, why, True, upper=upper) if why else plan


def chosen_logprobs(choice: dict) -> list[tuple[float, list[float]]] | None:
    """Per token a choice (or a stream chunk's choice) chose: its logprob and the values of its
    `top_logprobs` (empty when none came); None: it carries no logprobs."""
    about = choice.get("logprobs") if isinstance(choice, dict) else None
    if not isinstance(about, dict):
        return None
    tokens = about.get("content")  # chat: one entry per token, its top list of entries
    if isinstance(tokens, list):
        return [(t["logprob"], _values(t.get("top_logprobs"))) for t in tokens
                if isinstance(t, dict) and _number(t.get("logprob"))]
    values = about.get("token_logprobs")  # completions: a top list per token, a token -> logprob object each
    if isinstance(values, list):
        tops = about.get("top_logprobs")
        tops = tops if isinstance(tops, list) and len(tops) == len(values) else [None] * len(values)
        return [(v, _values(top)) for v, top in zip(values, tops) if _number(v)]
    return None


def _values(top) -> list[float]:
    if isinstance(top, dict):
        return [v for v in top.values() if _number(v)]
    if isinstance(top, list):
        return [t["logprob"] for t in top if isinstance(t, dict) and _number(t.get("logprob"))]
    return []


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Confidence:
    """The first answer's logprobs (with each token's top list) gathered per choice, whole or chunk
    by chunk; the answer's confidence is its least sure choice's."""

    def __init__(self):
        self.by_choice: dict[int, list[tuple[float, list[float]]]] = {}
        self.tokens = 0

    def add(self, obj: dict) -> None:
        for choice in obj.get("choices") or () if isinstance(obj, dict) else ():
            found = chosen_logprobs(choice)
            if found is None:
                continue
            self.by_choice.setdefault(choice.get("index", 0) if isinstance(choice, dict) else 0, []).extend(found)
            self.tokens += len(found)

    def score(self) -> float | None:
        if not self.by_choice:
            return None
        return min(answer_confidence([lp for lp, _ in tokens], [top for _, top in tokens])
                   for tokens in self.by_choice.values())


def whole_confidence(body: bytes) -> float | None:
    """The confidence of a whole answer; None when it is not JSON or carries no logprobs."""
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    confidence = Confidence()
    confidence.add(obj)
    return confidence.score()


def judge(plan: CascadePlan, first: Tier, confidence: float | None, upper: Tier | None) -> CascadeVerdict:
    """Keep or escalate the first tier's answer; `upper` is the tier above the one that answered."""
    if confidence is None:
        return CascadeVerdict(KEPT, "no_logprobs", first.name)
    if confidence >= plan.threshold:
        return CascadeVerdict(KEPT, "confident", first.name, confidence)
    if upper is None:
        return CascadeVerdict(KEPT, "no_higher_tier", first.name, confidence)
    return CascadeVerdict(ESCALATED, "low_confidence", first.name, confidence)


def without_logprobs(payload: bytes) -> bytes:
    """An answer or a stream chunk with the logprobs the gateway asked for (not the client) set to null."""
    if b'"logprobs"' not in payload:
        return payload
    try:
        obj = json.loads(payload)
    except ValueError:
        return payload
    for choice in obj.get("choices") or () if isinstance(obj, dict) else ():
        if isinstance(choice, dict) and "logprobs" in choice:
            choice["logprobs"] = None
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
