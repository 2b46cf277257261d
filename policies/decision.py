"""The routing decision as a pure function: (policy, classifier output, usage, tiers) -> Decision.

No I/O and no clock: everything it needs comes in as arguments, so `/v1/route` can show exactly
why a tier was chosen (`Decision.rules`), and the tests can enumerate cases.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from wire.errors import OpenAIError

from policies.config import TenantPolicy
from policies.costs import micro_to_usd

AUTO = "auto"
BASE_THRESHOLD = 0.5       # pick the lowest level whose "needs more than this" probability <= threshold
PREFERENCE_SWING = 0.4     # quality_preference +1 -> threshold 0.1 (go up readily), -1 -> 0.9


@dataclass(frozen=True)
class UsageSnapshot:
    """Spend so far in the current UTC day and month, micro-dollars (what soft budgets compare to)."""
    day_spend_micro: int = 0
    month_spend_micro: int = 0


@dataclass(frozen=True)
class Decision:
    tier_name: str
    rules: list[str] = field(default_factory=list)
    max_tokens_cap: int | None = None
    priority: str = "interactive"
    sampling_rate: float | None = None


def _attr(tier: Any, name: str) -> Any:
    return tier[name] if isinstance(tier, dict) else getattr(tier, name)


def level_from_scores(scores: Sequence[float], threshold: float) -> int:
    """Lowest level L (1-based; scores[i] is P(level i+1)) with P(level > L) <= threshold."""
    total = float(sum(scores)) or 1.0
    above = 1.0
    for index, score in enumerate(scores):
        above -= score / total
        if above <= threshold + 1e-12:
            return index + 1
    return len(scores)


def _tier_for_level(tiers: Sequence[Any], level: int) -> int:
    """Index of the cheapest tier whose level is >= the requested level (the top tier if none)."""
    for index, tier in enumerate(tiers):
        if _attr(tier, "level") >= level:
            return index
    return len(tiers) - 1


def _permitted(policy: TenantPolicy, tier: Any) -> bool:
    return ((policy.allowed_tiers is None or _attr(tier, "name") in policy.allowed_tiers)
            and (policy.allowed_models is None or _attr(tier, "model") in policy.allowed_models))


def _bounds(policy: TenantPolicy, names: list[str]) -> tuple[int, int]:
    low = names.index(policy.min_tier) if policy.min_tier in names else 0
    high = names.index(policy.max_tier) if policy.max_tier in names else len(names) - 1
    return low, high


def _explicit_index(requested: str, tiers: Sequence[Any], policy: TenantPolicy) -> int | None:
    """A tier named directly, or the cheapest permitted tier serving the named model."""
    names = [_attr(t, "name") for t in tiers]
    if requested in names:
        return names.index(requested)
    serving = [i for i, t in enumerate(tiers) if _attr(t, "model") == requested]
    permitted = [i for i in serving if _permitted(policy, tiers[i])]
    return (permitted or serving or [None])[0]


def _classifier_index(policy: TenantPolicy, scores, classifier_tier, tiers, rules: list[str]) -> int:
    preference = policy.quality_preference
    if scores and (preference != 0.0 or classifier_tier is None):
        threshold = BASE_THRESHOLD - PREFERENCE_SWING * preference
        level = level_from_scores(scores, threshold)
        if preference != 0.0:
            rules.append(f"quality_preference={preference:+.2f}: threshold {threshold:.2f} -> level {level}"
                         + (f" (classifier said {classifier_tier})" if classifier_tier is not None else ""))
    elif classifier_tier is not None:
        level = int(classifier_tier)
    else:
        level = _attr(tiers[0], "level")
        rules.append("no_classifier_output: cheapest tier")
    index = _tier_for_level(tiers, level)
    if policy.tier_bias:
        moved = min(max(index + policy.tier_bias, 0), len(tiers) - 1)
        rules.append(f"tier_bias={policy.tier_bias:+d}: {_attr(tiers[index], 'name')} -> {_attr(tiers[moved], 'name')}")
        index = moved
    return index


def _clamp(index: int, low: int, high: int, names: list[str], rules: list[str]) -> int:
    if index < low:
        rules.append(f"min_tier={names[low]}: {names[index]} -> {names[low]}")
        return low
    if index > high:
        rules.append(f"max_tier={names[high]}: {names[index]} -> {names[high]}")
        return high
    return index


def _nearest_permitted(index: int, allowed: list[int], names: list[str], rules: list[str]) -> int:
    if index in allowed:
        return index
    above = [i for i in allowed if i > index]
    chosen = above[0] if above else max(i for i in allowed if i < index)
    rules.append(f"allowed_tiers: {names[index]} not allowed -> {names[chosen]}")
    return chosen


def _soft_budget(policy: TenantPolicy, usage: UsageSnapshot) -> str | None:
    b = policy.budgets
    if b.daily_soft is not None and usage.day_spend_micro >= b.daily_soft:
        return f"daily soft budget {micro_to_usd(b.daily_soft):.2f} USD reached"
    if b.monthly_soft is not None and usage.month_spend_micro >= b.monthly_soft:
        return f"monthly soft budget {micro_to_usd(b.monthly_soft):.2f} USD reached"
    return None


def decide(policy: TenantPolicy, requested_model: str, scores: Sequence[float] | None,
           classifier_tier: int | None, tiers: Sequence[Any], usage: UsageSnapshot) -> Decision:
    """Pick the tier for one request; `tiers` ascending by level. Raises OpenAIError(403/404)."""
    names = [_attr(t, "name") for t in tiers]
    low, high = _bounds(policy, names)
    allowed = [i for i in range(low, high + 1) if _permitted(policy, tiers[i])]
    if not allowed:
        raise OpenAIError(403, "no tier is allowed for this tenant", code="model_not_allowed")
    rules: list[str] = []
    pinned = policy.pinned_routes.get(requested_model)
    if pinned is not None:
        # A pin is the administrator's explicit choice: bias, budgets and classifier do not move it.
        rules.append(f"pinned_route: {requested_model} -> {pinned}")
        return _finish(policy, pinned, rules)
    explicit = None if requested_model == AUTO else _explicit_index(requested_model, tiers, policy)
    if explicit is not None:
        if not _permitted(policy, tiers[explicit]):
            raise OpenAIError(403, f"model {requested_model!r} is not allowed for this tenant",
                              param="model", code="model_not_allowed")
        index = _clamp(explicit, low, high, names, rules)
    elif requested_model == AUTO or scores or classifier_tier is not None:
        index = _clamp(_classifier_index(policy, scores, classifier_tier, tiers, rules), low, high, names, rules)
    else:
        raise OpenAIError(404, f"model {requested_model!r} does not exist", param="model", code="model_not_found")
    index = _nearest_permitted(index, allowed, names, rules)
    reason = _soft_budget(policy, usage)
    if reason and policy.soft_budget_action == "downgrade":
        cheaper = [i for i in allowed if i < index]
        if cheaper:
            rules.append(f"soft_budget: {reason}: {names[index]} -> {names[cheaper[-1]]}")
            index = cheaper[-1]
        else:
            rules.append(f"soft_budget: {reason}: already on the cheapest allowed tier")
    elif reason:
        rules.append(f"soft_budget: {reason}: action none")
    return _finish(policy, names[index], rules)


def _finish(policy: TenantPolicy, tier_name: str, rules: list[str]) -> Decision:
    if policy.max_tokens is not None:
        rules.append(f"max_tokens_cap={policy.max_tokens}")
    if policy.priority != "interactive":
        rules.append(f"priority={policy.priority}")
    if policy.sampling_rate is not None:
        rules.append(f"sampling_rate={policy.sampling_rate}")
    return Decision(tier_name, rules, policy.max_tokens, policy.priority, policy.sampling_rate)
