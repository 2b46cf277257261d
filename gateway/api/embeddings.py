"""Routing for /v1/embeddings: the tier is chosen by model name alone.

There is no complexity to classify in an embedding request and vectors from different
models are not interchangeable, so 'auto' is refused and the named embeddings tier (or the
cheapest one serving the named model, or an alias of one) answers, if the tenant's
allowed_tiers and allowed_models permit it (a 403 naming the field otherwise). Failover stays
within the embeddings tiers the tenant may use (Config.tiers_above). Rate limits, budgets and
accounting apply as for chat.
"""
from __future__ import annotations

from wire.embeddings import EmbeddingsRequest, estimated_tokens
from wire.prompt_bound import inputs_token_bound
from wire.errors import OpenAIError, bad_request

from policies.decision import permitted
from policies.decision_types import Decision, RoutedBy, Step, StepKind

from ..config import AUTO, Config, Tier
from ..core.routing import Route


def plan_embeddings_route(config: Config, tenant, parsed: EmbeddingsRequest) -> Route:
    if config.resolve_model(parsed.model) == AUTO:
        raise bad_request("embeddings need a model name: vectors from different models are not "
                          "interchangeable, so 'auto' cannot choose one", param="model", code="invalid_value")
    tier = config.embedding_tier(parsed.model)
    if tier is None and config.resolve_model(parsed.model) is not None:
        raise bad_request(f"'{parsed.model}' is a chat model: send it to /v1/chat/completions or /v1/completions "
                          "(/v1/models lists each model's endpoints)", param="model", code="wrong_endpoint")
    if tier is None:
        known = [t.name for t in config.embedding_tiers]
        raise OpenAIError(404, f"The model '{parsed.model}' does not serve embeddings (embeddings models: "
                          f"{known})", param="model", code="model_not_found")
    policy = getattr(tenant, "policy", None)
    if policy is not None and not permitted(policy, tier):
        field = "allowed_tiers" if policy.allowed_tiers is not None and tier.name not in policy.allowed_tiers \
            else "allowed_models"
        raise OpenAIError(403, f"model {parsed.model!r} (embeddings tier {tier.name!r}) is not allowed for this "
                               f"tenant ({field})", param="model", code="model_not_allowed")
    priority = getattr(policy, "priority", "interactive")
    named = Step(StepKind.REQUESTED, {"model": parsed.model, "tier": tier.name, "by": "embeddings model name"})
    decision = Decision(tier.name, RoutedBy.EXPLICIT, (named,), baseline_tier=tier.name, priority=priority)
    return Route(requested_model=parsed.model, tier=tier, decision=decision, classification=None,
                 prompt_text="", affinity_keys=[], estimated_prompt_tokens=estimated_tokens(parsed.inputs),
                 prompt_bound=inputs_token_bound(parsed.inputs),
                 escalation_path=tuple(t for t in config.tiers_above(tier) if policy is None or permitted(policy, t)))
