"""From a validated request to a routing decision: resolve the model, classify, apply policy."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from policies.decision import Decision, RouteRequest, Signal
from webwire.tracing import span, traced
from wire.capabilities import Capabilities, needs_of
from wire.errors import OpenAIError, bad_request
from wire.prompt_bound import prompt_token_bound
from wire.token_ids import check_token_ids, named_token_ids
from wire.requests import ChatRequest, CompletionRequest, conversation_text

from .affinity import prefix_keys
from .cache_salt import cache_salt
from .classify import Classification, Classifier, ClassifierSlot
from ..config import AUTO, TENANT_SCOPE, Config, Tier
from .metrics import METRICS
from .policy_seam import PolicyService


class QualityShift(Protocol):
    def threshold_shift(self, tenant: str) -> dict[int, float]: ...

    def cascade_threshold(self, tenant: str): ...  # core/cascade.LiveThreshold | None


@dataclass(frozen=True, slots=True)
class Router:
    """Everything routing reads of the process: the classifier slot (a hot swap replaces what it
    holds), the policy, each tier's capabilities and the quality monitor's threshold shift. A
    reload or a new worker card swaps it whole; a request keeps the one it began with."""
    classifiers: ClassifierSlot
    policy: PolicyService
    capabilities: dict[str, Capabilities]
    quality: QualityShift

    @property
    def classifier(self) -> Classifier:
        return self.classifiers.current


@dataclass(frozen=True)
class Route:
    requested_model: str
    tier: Tier
    decision: Decision
    classification: Classification | None
    prompt_text: str
    affinity_keys: list[str]
    estimated_prompt_tokens: int  # a quarter of its characters: sizes the context a tier must hold
    prompt_bound: int  # at most the tokens a worker renders for it (wire/prompt_bound.py): prices it
    # the tiers above `tier` this request may climb to (failover, shape re-ask), cheapest first: only
    # those its policy allows (allowed_tiers, max_tier) and that can serve it (capabilities)
    escalation_path: tuple[Tier, ...]
    affinity_scope: str = ""  # whose prefixes its affinity keys find: its tenant's, or "" (shared by all)
    cache_salt: str = ""  # sent to the workers as `cache_salt` (core/cache_salt.py); "": none

    def next_up(self, tier: Tier) -> Tier | None:
        """The cheapest tier of the escalation path above `tier`; None: nowhere this request may go."""
        return next((t for t in self.escalation_path if t.level > tier.level), None)

    def keys_for(self, tier: Tier, config: Config) -> list[str]:
        """Affinity keys are per model: after an escalation to another model they differ."""
        if tier.model == self.tier.model:
            return self.affinity_keys
        return _keys(self.prompt_text, tier, config, self.affinity_scope)


def affinity_scope(config: Config, tenant) -> str:
    return tenant.name if config.affinity.scope == TENANT_SCOPE else ""


def _keys(text: str, tier: Tier, config: Config, scope: str) -> list[str]:
    if not config.affinity.enabled:
        return []
    return prefix_keys(text, tier.model, config.affinity, config.redis.key_prefix, scope)


def prompt_text(parsed: ChatRequest | CompletionRequest) -> str:
    if isinstance(parsed, ChatRequest):
        return conversation_text(parsed.messages)
    prompt = parsed.prompt
    return prompt if isinstance(prompt, str) else " ".join(map(str, prompt))


@traced("classify")
def _classify(router: Router, parsed: ChatRequest | CompletionRequest, tenant: str) -> Classification:
    started = time.perf_counter()
    if isinstance(parsed, ChatRequest):
        classification = router.classifier.classify(parsed.messages, None, tenant)
    else:
        text = parsed.prompt if isinstance(parsed.prompt, str) else prompt_text(parsed)
        classification = router.classifier.classify(None, text, tenant)
    METRICS.classifier.labels(classification.classifier).observe(time.perf_counter() - started)
    return classification


def _signal(router: Router, c: Classification, tenant: str) -> Signal:
    shift = router.quality.threshold_shift(tenant)  # the quality monitor's shift for this tenant (gateway/quality/)
    return Signal(level=int(c.tier), scores=tuple(c.scores) if c.scores is not None else None,
                  thresholds=c.thresholds, quality_shift=shift or None, target_thresholds=c.target_thresholds)


def plan_route(router: Router, config: Config, tenant, parsed: ChatRequest | CompletionRequest, body: dict,
               max_tokens: int, explain: bool = False) -> Route:
    """The route for a parsed request; `max_tokens` is what it may generate (asked or default)."""
    requested = parsed.model
    resolved = config.resolve_model(requested)
    if resolved != AUTO and (config.tier(resolved) if resolved else config.embedding_tier(requested)) in \
            config.embedding_tiers:
        raise bad_request(f"'{requested}' is an embeddings model: send it to /v1/embeddings (/v1/models lists "
                          "each model's endpoints)", param="model", code="wrong_endpoint")
    classification = _classify(router, parsed, tenant.name) if resolved == AUTO else None
    text = prompt_text(parsed)
    estimated = len(text) // 4 + 1
    request = RouteRequest(requested_model=resolved if resolved is not None else requested,
                           signal=_signal(router, classification, tenant.name) if classification is not None else None,
                           needs=needs_of(body, estimated, max_tokens),
                           capabilities=router.capabilities, explain=explain)
    with span("decide"):
        decision = router.policy.decide(tenant, request, config.tiers)
    tier = config.tier(decision.tier_name)
    if tier is None:
        raise OpenAIError(404, f"The model '{requested}' does not exist", param="model", code="model_not_found")
    path = tuple(t for t in config.tiers_above(tier) if t.name in decision.usable_tiers)
    _check_token_ids(router, config, tier, path, parsed)
    scope = affinity_scope(config, tenant)
    return Route(requested_model=requested, tier=tier, decision=decision, classification=classification,
                 prompt_text=text, affinity_keys=_keys(text, tier, config, scope), estimated_prompt_tokens=estimated,
                 prompt_bound=prompt_token_bound(parsed), escalation_path=path, affinity_scope=scope,
                 cache_salt=cache_salt(scope) if scope and config.affinity.cache_salt else "")


def _check_token_ids(router: Router, config: Config, tier: Tier, path: tuple[Tier, ...],
                     parsed: ChatRequest | CompletionRequest) -> None:
    """Token ids the request names must exist in every tier it may reach (its own, and those a
    failover escalates to), as far as their workers' cards state a vocabulary."""
    prompt = getattr(parsed, "prompt", None)
    if not named_token_ids(parsed.params, prompt):
        return
    reach = [tier, *path] if config.failover.escalate else [tier]
    for each in reach:
        vocab = router.capabilities[each.name].vocab_size if each.name in router.capabilities else None
        if vocab is not None:
            check_token_ids(parsed.params, vocab, prompt, where=f"tier {each.name!r}")
