"""Where per-tenant policies (policies/) plug into the gateway.

The gateway calls, per request: authenticate -> decide -> admit -> (relay) -> settle.
settle runs exactly once per admitted client request, after the final attempt, with the
usage actually served (for a cut stream: the tokens streamed so far).
OpenPolicy is the default when the config has no `tenants:` section.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from wire.errors import OpenAIError

from .accounting import publish_policy
from .config import AUTO, Config


class Tenant(Protocol):
    name: str


class Decision(Protocol):
    tier_name: str
    rules: list[str]
    max_tokens_cap: int | None
    priority: str


class PolicyService(Protocol):
    def authenticate(self, authorization: str | None) -> Tenant: ...

    def decide(self, tenant, requested_model: str, scores: list[float] | None,
               classifier_tier: int | None, tiers: list) -> Decision: ...

    async def admit(self, tenant, request_id: str, estimated_prompt_tokens: int, max_tokens: int) -> Any: ...

    async def settle(self, admission, request_id: str, tier_name: str,
                     prompt_tokens: int, completion_tokens: int) -> None: ...


@dataclass(frozen=True)
class AnonymousTenant:
    name: str = "anonymous"


@dataclass
class OpenDecision:
    tier_name: str
    rules: list[str] = field(default_factory=list)
    max_tokens_cap: int | None = None
    priority: str = "interactive"


class OpenPolicy:
    """No keys, no limits: everyone is 'anonymous', the classifier (or the request) picks the tier."""

    _TENANT = AnonymousTenant()

    def authenticate(self, authorization: str | None) -> AnonymousTenant:
        return self._TENANT

    def decide(self, tenant, requested_model, scores, classifier_tier, tiers) -> OpenDecision:
        # The gateway has already resolved aliases: requested_model is 'auto' or a tier name.
        if requested_model == AUTO:
            able = [t for t in tiers if t.level >= (classifier_tier or 1)]
            tier = min(able, key=lambda t: t.level) if able else max(tiers, key=lambda t: t.level)
            return OpenDecision(tier.name, [f"classifier:level{classifier_tier}->{tier.name}"])
        if any(t.name == requested_model for t in tiers):
            return OpenDecision(requested_model, ["explicit-model"])
        raise OpenAIError(404, f"The model '{requested_model}' does not exist", param="model",
                          code="model_not_found")

    async def admit(self, tenant, request_id, estimated_prompt_tokens, max_tokens):
        return None

    async def settle(self, admission, request_id, tier_name, prompt_tokens, completion_tokens) -> None:
        return None


def build_policy_service(config: Config, redis) -> PolicyService:
    """The policy service for this config; the real one arrives with policies/."""
    if not config.raw.get("tenants"):
        publish_policy(config, None)
        return OpenPolicy()
    try:
        from policies.service import build_service  # provided by the policies package
    except ImportError as exc:
        raise RuntimeError("config has a 'tenants' section but policies.service is not available") from exc
    service = build_service(config, redis)
    publish_policy(config, service)  # budgets as gauges, known cost series at 0
    return service
