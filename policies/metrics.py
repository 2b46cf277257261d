"""Prometheus counters of the policy layer (default registry: the gateway's /metrics exports them).
Labels stay bounded: tenant names come from the config, never keys or request ids."""
from prometheus_client import Counter

REDIS_UNAVAILABLE = Counter(
    "tiergate_policy_redis_unavailable_total",
    "Policy operations that could not reach Redis, by what was done instead",
    ["operation", "action"])
REJECTIONS = Counter(
    "tiergate_policy_rejections_total", "Requests refused by a tenant limit", ["tenant", "reason"])
DUPLICATE_SETTLES = Counter(
    "tiergate_policy_duplicate_settles_total", "Settles ignored because the request id was already counted")
REGISTRY_SYNC = Counter(
    "tiergate_registry_sync_total",
    "How this replica brought its copy of the API-managed tenants and keys up to date: change (a "
    "change read from the feed), reload (everything read again: the feed no longer reached back), "
    "lost (the subscription broke; polling covers until it is back)", ["how"])
TAGS_DROPPED = Counter(
    "tiergate_tags_dropped_total", "Request tags dropped because the tenant's allowed_tags does not name them",
    ["tenant"])
TAG_SPEND = Counter(
    "tiergate_tag_spend_usd_total", "Settled spend by tag (a request with several tags counts for each); tags "
                                    "are bounded by each tenant's allowed_tags", ["tenant", "tag"])
BUDGET_ALERTS = Counter(
    "tiergate_budget_alerts_total",
    "Budget thresholds crossed: one per tenant, budget, period and threshold, counted by the replica that "
    "created the alert", ["tenant", "budget", "threshold_percent"])
ALERT_DELIVERIES = Counter(
    "tiergate_budget_alert_deliveries_total",
    "Webhook deliveries of budget alerts by outcome: delivered, retry (the receiver failed; tried again "
    "later) or failed (out of attempts)", ["outcome"])
