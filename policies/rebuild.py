"""Recompute the Redis spend ledger from usage logs (after a Redis crash, or to audit it)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from policies.store import PolicyStore
from policies.periods import PERIODS
from policies.usage_log import UsageRecord, read_records, record_periods


@dataclass
class LedgerTotals:
    day_spend: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    month_spend: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    day_usage: dict[tuple[str, str], dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    day_tags: dict[tuple[str, str], dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    week_spend: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    # (tenant, key id, period, label) -> the key's own spend (daily, weekly and monthly)
    key_spend: dict[tuple[str, str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    requests: int = 0
    duplicates: int = 0


def totals_from_records(records: list[UsageRecord]) -> LedgerTotals:
    """Sum per tenant (and key) and the day, week and month each record was booked under; a request id
    seen twice (logged by two replicas) counts once."""
    totals, seen = LedgerTotals(), set()
    for r in records:
        if (r.tenant, r.request_id) in seen:
            totals.duplicates += 1
            continue
        seen.add((r.tenant, r.request_id))
        totals.requests += 1
        totals.day_spend[(r.tenant, r.day)] += r.cost_micro
        totals.month_spend[(r.tenant, r.month)] += r.cost_micro
        periods = record_periods(r)
        totals.week_spend[(r.tenant, periods.week)] += r.cost_micro
        if r.key_id:
            for period in PERIODS:
                totals.key_spend[(r.tenant, r.key_id, period, periods.label(period))] += r.cost_micro
        for name, usage in ((r.tier, totals.day_usage[(r.tenant, r.day)]),
                            *((tag, totals.day_tags[(r.tenant, r.day)]) for tag in r.tags)):
            usage[f"{name}:requests"] += 1
            usage[f"{name}:prompt_tokens"] += r.prompt_tokens
            usage[f"{name}:completion_tokens"] += r.completion_tokens
            usage[f"{name}:cost_micro"] += r.cost_micro
    return totals


async def rebuild_ledger(store: PolicyStore, paths: list[str]) -> dict:
    """Overwrite every (tenant, day) and (tenant, month) present in the logs with the logs' totals.

    Pass *all* logs (every replica, rotated files included) of the months concerned: a month's
    total is recomputed from the records given, not added to what Redis had."""
    totals = totals_from_records(read_records(paths))
    for (tenant, day), spend in totals.day_spend.items():
        await store.replace_ledger(tenant, day, None, spend, dict(totals.day_usage[(tenant, day)]),
                                   dict(totals.day_tags.get((tenant, day), {})))
    for (tenant, month), spend in totals.month_spend.items():
        await store.replace_ledger(tenant, None, month, spend)
    for (tenant, week), spend in totals.week_spend.items():
        await store.replace_spend(tenant, None, "weekly", week, spend)
    for (tenant, key_id, period, label), spend in totals.key_spend.items():
        await store.replace_spend(tenant, key_id, period, label, spend)
    return {"files": len(paths), "requests": totals.requests, "duplicates_skipped": totals.duplicates,
            "tenant_days": len(totals.day_spend), "tenant_weeks": len(totals.week_spend),
            "tenant_months": len(totals.month_spend), "key_periods": len(totals.key_spend),
            "spend_micro_usd": sum(totals.day_spend.values())}
