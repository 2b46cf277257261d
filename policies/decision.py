"""The routing decision, as one pure function: (tenant policy, request, tiers, usage) -> Decision.

For `auto`, in this order: the classifier's scores against its calibrated thresholds, plus the
quality monitor's shift, plus the tenant's quality_preference (a further shift, never a
replacement) -> a level -> the cheapest tier at or above it -> tier_bias -> min/max_tier ->
allowed tiers -> capability filter -> the cheapest allowed, capable tier at or above that
-> soft budget. A named tier or model (or a pinned route) skips the classifier, and a
capability it lacks is a 400 naming the request parameter.

No I/O and no clock: everything comes in as arguments, so `/v1/route` shows exactly the
steps taken (`Decision.steps`, recorded when `RouteRequest.explain` asks) and tests can
enumerate cases.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from wire.capabilities import CONTEXT, Capabilities, Needs
from wire.errors import OpenAIError

from policies.budgets import Budgets
from policies.config import TenantPolicy
from policies.periods import PERIODS
from policies.costs import micro_to_usd
from policies.decision_types import AUTO, Decision, RoutedBy, RouteRequest, Signal, Step, StepKind

__all__ = ["AUTO", "Decision", "RouteRequest", "RoutedBy", "Signal", "UsageSnapshot", "decide_route",
           "effective_thresholds", "level_for", "tier_index_for_level"]

BASE_THRESHOLDS = {2: 0.5, 3: 0.5, 4: 0.5}  # a classifier that ships no calibration
PREFERENCE_SWING = 0.4  # quality_preference +1 lowers every threshold by 0.4 (goes up readily), -1 raises it


@dataclass(frozen=True)
class UsageSnapshot:
    """Spend so far in the current day, week and month, micro-dollars (what soft budgets compare to),
    and the authenticating key's own budgets and spend when it has budgets."""
    day_spend_micro: int = 0
    month_spend_micro: int = 0
    week_spend_micro: int = 0
    key_budgets: Budgets | None = None
    key_spend: Any = None  # policies.store.Spend of the key, with key_budgets


def _spent(usage: UsageSnapshot, period: str) -> int:
    return {"daily": usage.day_spend_micro, "weekly": usage.week_spend_micro,
            "monthly": usage.month_spend_micro}[period]


def _attr(tier: Any, name: str) -> Any:
    return tier[name] if isinstance(tier, dict) else getattr(tier, name)


# -- scores -> level --------------------------------------------------------------------------

def effective_thresholds(calibrated: Mapping[int, float] | None, quality_shift: Mapping[int, float] | None,
                         preference: float) -> dict[int, float]:
    """Threshold on P(level >= k) per k: calibrated + quality shift + preference shift, within [0, 1]."""
    base = calibrated or BASE_THRESHOLDS
    shift = quality_shift or {}
    return {k: min(1.0, max(0.0, base[k] + shift.get(k, 0.0) - PREFERENCE_SWING * preference)) for k in sorted(base)}


def level_for(scores: Sequence[float], thresholds: Mapping[int, float]) -> int:
    """The highest level k whose P(level >= k) reaches its threshold (1 if none does).

    Tails are summed from the top level down, as the classifier's own decision does."""
    tail = 0.0
    for k in range(len(scores), 1, -1):
        tail += scores[k - 1]
        if tail >= thresholds.get(k, 0.5):
            return k
    return 1


# -- the one "cheapest tier" rule ---------------------------------------------------------------

def cheapest_from(floor: int, among: Sequence[int]) -> int | None:
    """Among tier indexes (ascending by level), the cheapest at or above `floor`, else the best below."""
    above = [i for i in among if i >= floor]
    if above:
        return min(above)
    return max(among) if among else None


def tier_index_for_level(levels: Sequence[int], level: int, among: Sequence[int] | None = None) -> int | None:
    """Index of the cheapest tier (of `among`, default all) able to answer a request of this level."""
    floor = next((i for i, tier_level in enumerate(levels) if tier_level >= level), len(levels))
    return cheapest_from(floor, range(len(levels)) if among is None else among)


# -- tenant rules -------------------------------------------------------------------------------

def permitted(policy: TenantPolicy, tier: Any) -> bool:
    """The tenant may use `tier` (chat or embeddings): allowed_tiers and allowed_models."""
    return ((policy.allowed_tiers is None or _attr(tier, "name") in policy.allowed_tiers)
            and (policy.allowed_models is None or _attr(tier, "model") in policy.allowed_models))


def _bounds(policy: TenantPolicy, names: list[str]) -> tuple[int, int]:
    low = names.index(policy.min_tier) if policy.min_tier in names else 0
    high = names.index(policy.max_tier) if policy.max_tier in names else len(names) - 1
    return low, high


def _explicit_index(requested: str, t: "_Tiers") -> int | None:
    """A tier named directly, or the cheapest permitted tier serving the named model."""
    if requested in t.names:
        return t.names.index(requested)
    serving = [i for i, tier in enumerate(t.tiers) if _attr(tier, "model") == requested]
    usable = [i for i in serving if permitted(t.policy, t.tiers[i])]
    return (usable or serving or [None])[0]


def _soft_budget(policy: TenantPolicy, usage: UsageSnapshot) -> str | None:
    owners = [("", policy.budgets, lambda p: _spent(usage, p))]
    if usage.key_budgets is not None:
        owners.append(("key's ", usage.key_budgets, usage.key_spend.of))
    for whose, budgets, spent in owners:
        if not budgets.soft:
            continue
        for period in PERIODS:
            soft = budgets.amount(period, "soft")
            if soft is not None and spent(period) >= soft:
                return f"{whose}{period} soft budget {micro_to_usd(soft):.2f} USD reached"
    return None


_NOTHING = Capabilities()


class _Trace:
    """The steps taken, recorded only when asked (`RouteRequest.explain`, the dry run): the request
    path decides by the same code without building the explanation."""
    __slots__ = ("steps",)

    def __init__(self, on: bool):
        self.steps: list[Step] | None = [] if on else None

    def add(self, kind: StepKind, detail: Callable[[], Mapping[str, Any]]) -> None:
        if self.steps is not None:
            self.steps.append(Step(kind, detail()))


class _Table:
    """What depends only on the tenant's policy and the tier list, worked out once per pair."""

    def __init__(self, policy: TenantPolicy, tiers: Sequence[Any]):
        self.policy, self.tiers = policy, tiers  # held, so the ids in the cache key stay theirs
        self.names = [_attr(t, "name") for t in tiers]
        self.levels = [_attr(t, "level") for t in tiers]
        self.low, self.high = _bounds(policy, self.names)
        self.allowed = [i for i in range(self.low, self.high + 1) if permitted(policy, tiers[i])]
        self._windows: tuple = (None, [])

    def windows(self, caps: Mapping[str, Capabilities]) -> list[tuple[int, int]]:
        """(tier index, stated context window) for this capability map (swapped whole, so cached)."""
        if self._windows[0] is not caps:
            stated = [(i, caps[n].max_context_tokens) for i, n in enumerate(self.names) if n in caps]
            self._windows = (caps, [(i, w) for i, w in stated if w is not None])
        return self._windows[1]


_TABLES: dict[tuple[int, int], _Table] = {}
_MAX_TABLES = 1024  # tenants x config generations; past it, start over


def _table(policy: TenantPolicy, tiers: Sequence[Any]) -> _Table:
    key = (id(policy), id(tiers))
    table = _TABLES.get(key)
    if table is None or table.policy is not policy or table.tiers is not tiers:
        if len(_TABLES) >= _MAX_TABLES:
            _TABLES.clear()
        table = _TABLES[key] = _Table(policy, tiers)
    return table


class _Tiers:
    """The tier list with what this tenant may use and what this request needs of it."""

    def __init__(self, policy: TenantPolicy, request: RouteRequest, tiers: Sequence[Any]):
        self.policy, self.request, self.tiers = policy, request, tiers
        table = _table(policy, tiers)
        self.names, self.levels, self.allowed = table.names, table.levels, table.allowed
        self.low, self.high = table.low, table.high
        if not self.allowed:
            raise OpenAIError(403, "no tier is allowed for this tenant", code="model_not_allowed")
        needs, caps = request.needs, request.capabilities
        if needs.features:
            lacking = ((i, caps.get(name, _NOTHING).lacks(needs)) for i, name in enumerate(self.names))
        else:  # most requests need no feature: only a stated context window can turn a tier away
            lacking = ((i, [CONTEXT]) for i, window in table.windows(caps) if needs.context_tokens > window)
        self.missing: dict[int, list[str]] = {i: m for i, m in lacking if m}  # tier index -> what it lacks
        self.capable = [i for i in range(len(self.names)) if i not in self.missing]
        self.usable = [i for i in self.allowed if i not in self.missing]

    def capability_detail(self) -> dict[str, Any]:
        needs = self.request.needs
        return {"needs": list(needs.features), "context_tokens": needs.context_tokens,
                "capable": [self.names[i] for i in self.capable],
                "excluded": {self.names[i]: m for i, m in self.missing.items()}}

    def refuse(self, index: int | None) -> OpenAIError:
        """400 naming the parameter no usable tier (or the named tier `index`) can honour."""
        needs: Needs = self.request.needs
        pool = [index] if index is not None else self.allowed
        lacking_somewhere = [self.missing[i] for i in pool if i in self.missing]
        # name what none of them can do, when there is such a thing
        common = [m for m in lacking_somewhere[0] if all(m in other for other in lacking_somewhere)]
        lacking = (common or lacking_somewhere[0])[0]
        param = needs.param_for(lacking)
        if lacking == CONTEXT:
            windows = [caps.max_context_tokens for i in pool
                       if (caps := self.request.capabilities.get(self.names[i])) and caps.max_context_tokens]
            where = f"tier {self.names[index]!r} holds" if index is not None else \
                "the largest window of the tiers this request may use holds"
            return OpenAIError(400, f"the request needs about {needs.context_tokens} tokens of context (its prompt "
                               f"plus 'max_tokens'); {where} {max(windows, default=0)}", param=param,
                               code="context_length_exceeded")
        where = f"tier {self.names[index]!r} lacks" if index is not None else "no tier this request may use has"
        return OpenAIError(400, f"'{param}' needs the {lacking!r} capability, which {where}",
                           param=param, code="unsupported_parameter")


def _clamp(index: int, t: _Tiers, trace: _Trace) -> int:
    moved = min(max(index, t.low), t.high)
    if moved != index:
        trace.add(StepKind.BOUNDS, lambda: {"min_tier": t.policy.min_tier, "max_tier": t.policy.max_tier,
                                            "from": t.names[index], "to": t.names[moved]})
    return moved


def _place(index: int, t: _Tiers, trace: _Trace) -> int:
    """From a wanted tier to the cheapest allowed, capable one at or above it (else the best below)."""
    if t.policy.allowed_tiers is not None or t.policy.allowed_models is not None or index not in t.allowed:
        trace.add(StepKind.ALLOWED_TIERS, lambda: {"allowed": [t.names[i] for i in t.allowed],
                                                   "wanted": t.names[index]})
    trace.add(StepKind.CAPABILITIES, t.capability_detail)
    chosen = cheapest_from(index, t.usable)
    if chosen is None:
        raise t.refuse(None)
    return chosen


def _budget(index: int, t: _Tiers, usage: UsageSnapshot, trace: _Trace) -> int:
    reason = _soft_budget(t.policy, usage)
    if reason is None:
        return index
    cheaper = [i for i in t.usable if i < index] if t.policy.soft_budget_action == "downgrade" else []
    moved = cheaper[-1] if cheaper else index
    trace.add(StepKind.SOFT_BUDGET, lambda: {"reason": reason, "action": t.policy.soft_budget_action,
                                             "from": t.names[index], "to": t.names[moved]})
    return moved


def calibrated_for(signal: Signal, quality_target: float | None) -> Mapping[int, float] | None:
    """The thresholds the outcome model calibrated for this quality target (the first calibrated target
    at or above it), else the signal's own."""
    table = signal.target_thresholds
    if quality_target is None or not table:
        return signal.thresholds
    at = min((t for t in table if t >= quality_target - 1e-9), default=max(table))
    return {k: table[at] for k in (2, 3, 4)}


def _scores_level(signal: Signal, preference: float, shift, target: float | None) -> tuple[int, dict[int, float]]:
    th = effective_thresholds(calibrated_for(signal, target), shift, preference)
    return level_for(signal.scores, th), th


def _level(signal: Signal | None, t: _Tiers, preference: float, shift, trace: _Trace) -> int:
    if signal is None:
        trace.add(StepKind.LEVEL, lambda: {"level": t.levels[0], "source": "no classifier output"})
        return t.levels[0]
    if signal.scores is None:  # a rule-based classifier: its level stands, there is nothing to shift
        trace.add(StepKind.LEVEL, lambda: {"level": signal.level, "source": "classifier level (no scores)"})
        return signal.level
    target = t.policy.quality_target
    level, th = _scores_level(signal, preference, shift, target)
    # keyed by level k (JSON turns them into strings); the mappings are swapped whole, never mutated
    trace.add(StepKind.THRESHOLDS, lambda: {
        "calibrated": calibrated_for(signal, target) or BASE_THRESHOLDS, "quality_shift": shift or {},
        "preference_shift": round(-PREFERENCE_SWING * preference, 6),
        "effective": {k: round(v, 6) for k, v in th.items()},
        "quality_target": target, "target_calibrated": bool(signal.target_thresholds)})
    trace.add(StepKind.LEVEL, lambda: {"level": level, "classifier_level": signal.level})
    return level


def _auto(t: _Tiers, level: int, usage: UsageSnapshot, trace: _Trace) -> int:
    index = tier_index_for_level(t.levels, level)
    bias = t.policy.tier_bias
    if bias:
        moved = min(max(index + bias, 0), len(t.levels) - 1)
        trace.add(StepKind.TIER_BIAS, lambda: {"bias": bias, "from": t.names[index], "to": t.names[moved]})
        index = moved
    return _budget(_place(_clamp(index, t, trace), t, trace), t, usage, trace)


def _decide_auto(t: _Tiers, usage: UsageSnapshot, trace: _Trace) -> Decision:
    signal, policy = t.request.signal, t.policy
    if signal is not None and signal.scores is not None:
        trace.add(StepKind.SCORES, lambda: {"scores": signal.scores, "classifier_level": signal.level})
    shift = signal.quality_shift if signal is not None else None
    level = _level(signal, t, policy.quality_preference, shift, trace)
    index = _auto(t, level, usage, trace)
    scored = signal is not None and signal.scores is not None
    # the classifier's own choice (calibrated thresholds, quality shift, capabilities; no tenant rule)
    own_level = _scores_level(signal, 0.0, shift, None)[0] if scored and (policy.quality_preference or
                                                                          policy.quality_target) else level
    baseline = tier_index_for_level(t.levels, own_level, t.capable)
    unshifted = None
    if shift and scored:
        unshifted = _auto(t, _scores_level(signal, policy.quality_preference, None, policy.quality_target)[0], usage,
                          _Trace(False))
    routed_by = RoutedBy.CLASSIFIER if index == baseline else RoutedBy.POLICY
    return _finish(t, t.names[index], routed_by, trace,
                   baseline=t.names[baseline] if baseline is not None else None,
                   unshifted=t.names[unshifted] if unshifted is not None and unshifted != index else None)


def _decide_named(t: _Tiers, usage: UsageSnapshot, trace: _Trace) -> Decision:
    requested, policy = t.request.requested_model, t.policy
    explicit = _explicit_index(requested, t)
    if explicit is None:
        raise OpenAIError(404, f"model {requested!r} does not exist", param="model", code="model_not_found")
    if not permitted(policy, t.tiers[explicit]):
        raise OpenAIError(403, f"model {requested!r} is not allowed for this tenant",
                          param="model", code="model_not_allowed")
    trace.add(StepKind.REQUESTED, lambda: {"model": requested, "tier": t.names[explicit]})
    index = _clamp(explicit, t, trace)
    if index not in t.allowed:
        index = cheapest_from(index, t.allowed)
        trace.add(StepKind.ALLOWED_TIERS, lambda: {"allowed": [t.names[i] for i in t.allowed]})
    trace.add(StepKind.CAPABILITIES, t.capability_detail)
    if index in t.missing:
        raise t.refuse(index)  # a named tier is never silently swapped for a capable one
    index = _budget(index, t, usage, trace)
    routed_by = RoutedBy.EXPLICIT if index == explicit else RoutedBy.POLICY
    return _finish(t, t.names[index], routed_by, trace, baseline=t.names[explicit])


def decide_route(policy: TenantPolicy, request: RouteRequest, tiers: Sequence[Any],
           usage: UsageSnapshot = UsageSnapshot()) -> Decision:
    """Pick the tier for one request; `tiers` ascending by level. Raises OpenAIError (400/403/404)."""
    t = _Tiers(policy, request, tiers)
    trace = _Trace(request.explain)
    pinned = policy.pinned_routes.get(request.requested_model)
    if pinned is not None:
        # A pin is the administrator's explicit choice: bias, budgets and classifier do not move it.
        trace.add(StepKind.PINNED, lambda: {"model": request.requested_model, "tier": pinned})
        index = t.names.index(pinned) if pinned in t.names else None
        if index is not None:
            trace.add(StepKind.CAPABILITIES, t.capability_detail)
            if index in t.missing:
                raise t.refuse(index)
        return _finish(t, pinned, RoutedBy.PINNED, trace, baseline=pinned)
    if request.requested_model == AUTO:
        return _decide_auto(t, usage, trace)
    return _decide_named(t, usage, trace)


def _finish(t: _Tiers, tier_name: str, routed_by: RoutedBy, trace: _Trace, *,
            baseline: str | None, unshifted: str | None = None) -> Decision:
    policy = t.policy
    trace.add(StepKind.CHOSEN, lambda: {"tier": tier_name, "routed_by": routed_by.value})
    limits = {k: v for k, v in (("max_tokens_cap", policy.max_tokens), ("sampling_rate", policy.sampling_rate))
              if v is not None}
    if limits or policy.priority != "interactive":
        trace.add(StepKind.LIMITS, lambda: {**limits, "priority": policy.priority})
    return Decision(tier_name, routed_by, tuple(trace.steps or ()), baseline, unshifted,
                    policy.max_tokens, policy.priority, policy.sampling_rate, policy.structured_escalation,
                    tuple(t.names[i] for i in t.usable))
