"""Routing for /v1/embeddings: the tier is chosen by model name alone.

There is no complexity to classify in an embedding request and vectors from different
models are not interchangeable, so 'auto' is refused and the named embeddings tier (or the
cheapest one serving the named model, or an alias of one) answers. Failover stays within
the embeddings tiers (Config.tiers_above). Embeddings tiers are open to every
authenticated tenant; rate limits, budgets and accounting apply as for chat.
"""
from __future__ import annotations

from wire.embeddings import EmbeddingsRequest, estimated_tokens
from wire.prompt_bound import inputs_token_bound
from wire.errors import OpenAIError, bad_request

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
    priority = getattr(getattr(tenant, "policy", None), "priority", "interactive")
    named = Step(StepKind.REQUESTED, {"model": parsed.model, "tier": tier.name, "by": "embeddings model name"})
    decision = Decision(tier.name, RoutedBy.EXPLICIT, (named,), baseline_tier=tier.name, priority=priority)
    return Route(requested_model=parsed.model, tier=tier, decision=decision, classification=None,
                 prompt_text="", affinity_keys=[], estimated_prompt_tokens=estimated_tokens(parsed.inputs),
                 prompt_bound=inputs_token_bound(parsed.inputs), escalation_path=config.tiers_above(tier))
