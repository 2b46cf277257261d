"""Cost accounting metrics: what each request cost, what it would have cost on the top tier,
why it went to its tier, and each tenant's budgets and ledger spend (the Cost dashboard).

Costs use the spend ledger's own arithmetic (policies.costs: integer pico-dollars per token,
rounded up once per request to a whole micro-dollar), so `tiergate_cost_usd_total` summed over
a tenant equals its `/v1/usage` spend to the micro-dollar, not just roughly.

"Top tier" is the config's highest-level tier; its counterfactual cost prices the same tokens
at that tier's prices (a bigger model would not use the same tokens, but this is the usual
and reproducible definition of "what routing saved").

Known series are created at 0 when a policy is built (start and every reload), so `increase()`
sees a tenant's first request instead of starting from it. Label values are bounded: tenants
and tiers come from the config, reasons from ROUTING_REASONS, levels are classifier levels.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from policies.budgets import Budgets
from policies.costs import MICRO_PER_USD, PICO_PER_MICRO, TierPrice, request_cost_micro, tier_price
from policies.decision_types import RoutedBy
from policies.periods import periods_at
from policies.service import PolicyService

from ..config import Config, Tier
from .metrics import METRICS, Counter, Gauge

# Why a request ended on its tier (the decision's routed_by, a policy move split by direction).
CACHE_RESULTS = ("hit", "semantic", "miss", "bypass")  # what the response cache did for a request (gateway/cache/)
ROUTING_REASONS = ("escalation", "failover", "pinned", "policy_downgrade", "policy_upgrade", "classifier", "explicit")

TOP_TIER_COST = Counter("tiergate_cost_top_tier_usd_total",
                        "What the served tokens would have cost at the top tier's prices",
                        ["tenant", "tier", "model"])
SAVED = Counter("tiergate_cost_saved_usd_total", "Top-tier cost minus actual cost of the served tokens",
                ["tenant", "tier", "model"])
ROUTED = Counter("tiergate_routed_requests_total", "Requests an upstream answered, by why their tier was chosen",
                 ["tenant", "tier", "reason"])
CLASSIFIER_LEVELS = Counter("tiergate_classifier_predictions_total",
                            "Complexity levels predicted by the classifier for served requests",
                            ["classifier", "level"])
BUDGET = Gauge("tiergate_tenant_budget_usd", "Configured budget per tenant", ["tenant", "period", "kind"],
               multiprocess_mode="livemostrecent")
SPEND = Gauge("tiergate_tenant_spend_usd", "Ledger spend of the current day/week/month, as of this "
              "gateway's last admit/settle for the tenant", ["tenant", "period"], multiprocess_mode="livemax")
_published: dict[tuple[str, str], tuple[str, float]] = {}  # (tenant, period) -> (period key, value) set here


@lru_cache(maxsize=256)
def _price(tier: Tier) -> TierPrice:
    try:
        return tier_price(tier)
    except ValueError:  # more than 6 decimals: the ledger refuses such configs; metrics round instead
        return TierPrice(round(tier.price_per_mtok.input * PICO_PER_MICRO),
                         round(tier.price_per_mtok.output * PICO_PER_MICRO))


def cost_micro(tier: Tier, prompt_tokens: int, completion_tokens: int) -> int:
    return request_cost_micro(_price(tier), prompt_tokens, completion_tokens)


def top_tier(config: Config, served: Tier | None = None) -> Tier:
    """The highest tier of the served request's kind (an embedding is never priced as a chat)."""
    same_task = config.embedding_tiers if served is not None and served.task == "embed" else config.tiers
    return max(same_task, key=lambda t: t.level)


def routing_reason(config: Config, route, served: Tier, attempts: int) -> str:
    """The decision's routed_by; escalation and failover are known only after serving, and a
    policy move is labelled by its direction against the tier the decision started from."""
    if served.name != route.tier.name:
        return RoutedBy.ESCALATION.value
    if attempts > 1:
        return RoutedBy.FAILOVER.value
    decision = route.decision
    if decision.routed_by is not RoutedBy.POLICY:
        return decision.routed_by.value
    baseline = config.tier(decision.baseline_tier) if decision.baseline_tier else None
    return "policy_downgrade" if baseline is not None and route.tier.level < baseline.level else "policy_upgrade"


@dataclass(frozen=True)
class Accounted:
    reason: str
    cost_micro: int = 0
    top_cost_micro: int = 0  # the same tokens at the top tier's prices


def record_request(config: Config, tenant: str, route, outcome) -> Accounted | None:
    """Account one finished client request (called once, after the final attempt); None when
    no upstream answered (nothing served, nothing routed)."""
    if outcome.opened is None:
        return None
    served, usage = outcome.served, outcome.usage
    reason = routing_reason(config, route, served, outcome.attempts)
    ROUTED.labels(tenant, served.name, reason).inc()
    if route.classification is not None:
        CLASSIFIER_LEVELS.labels(route.classification.classifier, str(int(route.classification.tier))).inc()
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    if prompt <= 0 and completion <= 0:
        return Accounted(reason)
    actual = record_cost(tenant, served, prompt, completion)
    top = top_tier(config, served)
    counterfactual = cost_micro(top, prompt, completion)
    TOP_TIER_COST.labels(tenant, served.name, served.model).inc(counterfactual / MICRO_PER_USD)
    SAVED.labels(tenant, served.name, served.model).inc(max(0, counterfactual - actual) / MICRO_PER_USD)
    return Accounted(reason, actual, counterfactual)


def record_hit(config: Config, tenant: str, served: Tier, usage, price: TierPrice) -> Accounted:
    """Account an answer served from the response cache: billed at `price`, and the tier's own
    price of it counted as saved by the cache."""
    billed = request_cost_micro(price, usage.prompt_tokens, usage.completion_tokens)
    METRICS.cost.labels(tenant, served.name, served.model).inc(billed / MICRO_PER_USD)
    at_tier = cost_micro(served, usage.prompt_tokens, usage.completion_tokens)
    METRICS.cache_saved.labels(tenant, served.name).inc(max(0, at_tier - billed) / MICRO_PER_USD)
    return Accounted("cache", billed, cost_micro(top_tier(config, served), usage.prompt_tokens,
                                                 usage.completion_tokens))


def record_cost(tenant: str, tier: Tier, prompt: int, completion: int) -> int:
    """Count the cost of tokens one tier served; returns it in micro-USD."""
    actual = cost_micro(tier, prompt, completion)
    METRICS.cost.labels(tenant, tier.name, tier.model).inc(actual / MICRO_PER_USD)
    return actual


def publish_policy(config: Config) -> None:
    """Budgets per tenant as gauges, and every known (tenant, tier) series at 0."""
    tenants = config.policies.tenants
    for name in list(tenants) or ["anonymous"]:
        for tier in (*config.tiers, *config.embedding_tiers):
            for series in (METRICS.cost, TOP_TIER_COST, SAVED):
                series.labels(name, tier.name, tier.model)
            for direction in ("in", "out"):
                METRICS.tokens.labels(name, tier.name, tier.model, direction)
            for reason in ROUTING_REASONS:
                ROUTED.labels(name, tier.name, reason)
        if config.cache.enabled:
            for tier in config.tiers:
                METRICS.cache_saved.labels(name, tier.name)
                for result in CACHE_RESULTS:
                    METRICS.cache.labels(name, tier.name, result)
        if name in tenants:
            _publish_budgets(name, tenants[name].policy.budgets)


def _publish_budgets(tenant: str, budgets: Budgets) -> None:
    for budget, period in (("daily", "day"), ("weekly", "week"), ("monthly", "month")):
        for kind in ("soft", "hard"):
            micro = budgets.amount(budget, kind)
            if micro is not None:
                BUDGET.labels(tenant, period, kind).set(micro / MICRO_PER_USD)


def publish_spend(policy: PolicyService, tenant: str) -> None:
    """The ledger's day/month spend as last returned by Redis to this process (exact figures).

    Several processes: /metrics shows the largest live value, and within a period spend only
    grows, so that is the newest. Hence a settle that finishes late never lowers the figure here,
    and when a period ends this process zeroes its old figures (until a process serves a
    tenant after midnight UTC, the tenant's "day" still shows yesterday's spend)."""
    spent = policy.snapshot(tenant)
    now = policy.clock()
    current = periods_at(now, policy.week_start)
    periods = {"day": current.day, "week": current.week, "month": current.month}
    for (name, period), (key, _) in list(_published.items()):
        if key != periods[period]:
            SPEND.labels(name, period).set(0)
            _published[(name, period)] = (periods[period], 0.0)
    for period, micro in (("day", spent.day_spend_micro), ("week", spent.week_spend_micro),
                          ("month", spent.month_spend_micro)):
        value = micro / MICRO_PER_USD
        if value >= _published.get((tenant, period), ("", 0.0))[1]:
            SPEND.labels(tenant, period).set(value)
            _published[(tenant, period)] = (periods[period], value)
