"""Cost dashboard: what did we spend, for whom, on which tier, and what did routing save."""
from __future__ import annotations

from .panels import (RANGE, RATE, bargauge, dashboard, label_variable, stat, table, target, targets,
                     timeseries)

T = '{tenant=~"$tenant"}'
COST = f"tiergate_cost_usd_total{T}"
TOP = f"tiergate_cost_top_tier_usd_total{T}"
SAVED = f"tiergate_cost_saved_usd_total{T}"
ROUTED = f"tiergate_routed_requests_total{T}"
TOKENS = f"tiergate_tokens_total{T}"

# Titles the accounting test looks panels up by (tests/dashboards/test_cost_accounting_figures.py).
SPEND_IN_RANGE = "Spend (selected range)"
SAVED_IN_RANGE = "Saved vs all-top-tier (selected range)"
SAVED_PERCENT = "Saved vs all-top-tier (%)"
COST_PER_1K = "Cost per 1k requests"
TOP_TENANTS = "Top tenants by spend (selected range)"
SPEND_TABLE = "Spend, requests and tokens by tenant and tier (selected range)"
BUDGET_BURN = "Budget burn: spend vs hard budget"
SPEND_BY_TAG = "Spend by tag (selected range)"


def _spend_panels() -> list[dict]:
    return [
        stat(SPEND_IN_RANGE, "Sum of what every served request cost at its tier's prices.",
             [target(f"sum(increase({COST}[{RANGE}]))", "spend", instant=True)], "currencyUSD", decimals=2),
        stat(SAVED_IN_RANGE, "All-top-tier cost minus actual cost: the same tokens priced at the top tier.",
             [target(f"sum(increase({SAVED}[{RANGE}]))", "saved", instant=True)], "currencyUSD", decimals=2),
        stat(SAVED_PERCENT, "Share of the all-top-tier cost that routing saved.",
             [target(f"100 * sum(increase({SAVED}[{RANGE}])) / sum(increase({TOP}[{RANGE}]))", "saved %",
                     instant=True)], "percent", decimals=1),
        stat(COST_PER_1K, "Spend per 1000 requests answered, in the selected range.",
             [target(f"1000 * sum(increase({COST}[{RANGE}])) / sum(increase({ROUTED}[{RANGE}]))", "per 1k",
                     instant=True)], "currencyUSD", decimals=4),
        timeseries("Spend per tenant (USD/hour)", "Spend rate by tenant.",
                   targets((f"3600 * sum by (tenant) (rate({COST}[{RATE}]))", "{{tenant}}")), "currencyUSD",
                   stack="normal"),
        timeseries("Spend per tier (USD/hour)", "Spend rate by tier.",
                   targets((f"3600 * sum by (tier) (rate({COST}[{RATE}]))", "{{tier}}")), "currencyUSD",
                   stack="normal"),
        timeseries("Actual vs all-top-tier cost (USD/hour)",
                   "What was spent, what the same tokens would have cost on the top tier, and the difference.",
                   targets((f"3600 * sum(rate({COST}[{RATE}]))", "actual"),
                           (f"3600 * sum(rate({TOP}[{RATE}]))", "all top tier"),
                           (f"3600 * sum(rate({SAVED}[{RATE}]))", "saved")), "currencyUSD"),
        timeseries("Saved vs all-top-tier over time (%)", "Saved share of the all-top-tier cost, per tenant.",
                   targets((f"100 * sum by (tenant) (rate({SAVED}[{RATE}])) / sum by (tenant) (rate({TOP}[{RATE}]))",
                            "{{tenant}}")), "percent", min=0, max=100),
    ]


def _tenant_panels() -> list[dict]:
    burn = ('100 * max by (tenant) (tiergate_tenant_spend_usd{{tenant=~"$tenant", period="{p}"}}) / on (tenant) '
            'max by (tenant) (tiergate_tenant_budget_usd{{tenant=~"$tenant", period="{p}", kind="hard"}})')
    return [
        bargauge(TOP_TENANTS, "The ten tenants that spent most in the selected range.",
                 [target(f"topk(10, sum by (tenant) (increase({COST}[{RANGE}])))", "{{tenant}}", instant=True)],
                 "currencyUSD"),
        bargauge(BUDGET_BURN, "Ledger spend of the current UTC day and month as a share of the tenant's hard "
                 "budget (requests are refused at 100%; the soft budget downgrades tiers earlier).",
                 targets((burn.format(p="day"), "{{tenant}} today"), (burn.format(p="month"), "{{tenant}} this month"),
                         instant=True), "percent", max_value=100,
                 thresholds=[(None, "green"), (75, "orange"), (90, "red")]),
        timeseries("Spend vs budget per tenant (today, USD)",
                   "Ledger spend of the current UTC day against the daily soft and hard budgets.",
                   targets(('max by (tenant) (tiergate_tenant_spend_usd{tenant=~"$tenant", period="day"})',
                            "{{tenant}} spent"),
                           ('max by (tenant) (tiergate_tenant_budget_usd{tenant=~"$tenant", period="day", kind="soft"})',
                            "{{tenant}} soft budget"),
                           ('max by (tenant) (tiergate_tenant_budget_usd{tenant=~"$tenant", period="day", kind="hard"})',
                            "{{tenant}} hard budget")), "currencyUSD"),
        bargauge(SPEND_BY_TAG, "Settled spend per tenant and tag (metadata.tags or x-tiergate-tags, as each "
                 "tenant's allowed_tags keeps them; a request with several tags counts for each).",
                 [target(f'topk(20, sum by (tenant, tag) (increase(tiergate_tag_spend_usd_total{T}[{RANGE}])))',
                         "{{tenant}} {{tag}}", instant=True)], "currencyUSD"),
        table(SPEND_TABLE, "Per tenant and tier: spend, answered requests, prompt and completion tokens.",
              targets((f"sum by (tenant, tier) (increase({COST}[{RANGE}]))", ""),
                      (f"sum by (tenant, tier) (increase({ROUTED}[{RANGE}]))", ""),
                      (f'sum by (tenant, tier) (increase(tiergate_tokens_total{{tenant=~"$tenant", direction="in"}}[{RANGE}]))', ""),
                      (f'sum by (tenant, tier) (increase(tiergate_tokens_total{{tenant=~"$tenant", direction="out"}}[{RANGE}]))', ""),
                      instant=True), size=(12, 8)),
    ]


def _mix_panels() -> list[dict]:
    return [
        timeseries("Tier distribution over time (share of requests)", "Which tiers answered the traffic.",
                   targets((f"sum by (tier) (rate({ROUTED}[{RATE}]))", "{{tier}}")), "short", stack="percent"),
        timeseries("Requests by routing reason (req/s)",
                   "Why each request got its tier: classifier, explicit model, pinned route, policy "
                   "downgrade/upgrade (budgets, clamps, bias), escalation to a higher tier, failover to another worker.",
                   targets((f"sum by (reason) (rate({ROUTED}[{RATE}]))", "{{reason}}")), "reqps", stack="normal"),
        timeseries("Tokens by tier and direction (tokens/s)", "Prompt (in) and completion (out) tokens served.",
                   targets((f"sum by (tier, direction) (rate({TOKENS}[{RATE}]))", "{{tier}} {{direction}}")),
                   "short"),
        timeseries("Cost per 1k requests over time (USD)", "Average spend per 1000 answered requests, per tier.",
                   targets((f"1000 * sum by (tier) (rate({COST}[{RATE}])) / sum by (tier) (rate({ROUTED}[{RATE}]))",
                            "{{tier}}")), "currencyUSD"),
    ]


def build() -> dict:
    variables = [label_variable("tenant", "Tenant", "tiergate_cost_usd_total", "tenant")]
    return dashboard("tiergate-cost", "Tiergate / Cost",
                     "Spend per tenant and tier, savings of routing against sending everything to the top tier, "
                     "budgets, and the tier mix.", _spend_panels() + _tenant_panels() + _mix_panels(), variables,
                     time_from="now-24h")
