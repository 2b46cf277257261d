"""Spend ledger against real Redis: exact to the micro-dollar over 1,000 mixed settles with
retried/escalated duplicates and cut streams; soft budget downgrades, hard budget blocks."""
from __future__ import annotations

import asyncio
import random

import pytest

from policies.costs import request_cost_micro, tier_price
from policies.decision_types import RouteRequest, RoutedBy, Signal, StepKind
from policies.usage_log import read_records
from tests.policies.policy_helpers import TIERS
from wire.errors import OpenAIError

PRICES = {t.name: tier_price(t) for t in TIERS}


async def test_ledger_equals_sum_of_request_costs_over_1000_mixed_settles(make_service):
    tenants = {"acme": {"keys": ["k-acme"]}}
    replica_a, replica_b = make_service(tenants), make_service(tenants)  # two gateways, one Redis
    tenant = replica_a.authenticate("Bearer k-acme")
    rng = random.Random(7)
    expected, per_tier, calls = 0, {}, []
    for i in range(1000):
        rid = f"req-{i}"
        tier = rng.choice(TIERS).name
        prompt = rng.randint(1, 4000)
        completion = rng.randint(0, 2000) if i % 10 else rng.randint(0, 3)  # every 10th: stream cut early
        admission = await replica_a.admit(tenant, rid, prompt, 512)
        expected += request_cost_micro(PRICES[tier], prompt, completion)
        per_tier[tier] = per_tier.get(tier, 0) + 1
        calls.append((replica_a, admission, rid, tier, prompt, completion))
        if i % 7 == 0:   # a retried settle from the same replica
            calls.append((replica_a, admission, rid, tier, prompt, completion))
        if i % 5 == 0:   # the same request id settled by another replica
            calls.append((replica_b, admission, rid, tier, prompt, completion))
    rng.shuffle(calls)
    for start in range(0, len(calls), 100):  # concurrent batches: duplicates race each other
        await asyncio.gather(*(svc.settle(adm, rid, tier, p, c) for svc, adm, rid, tier, p, c in calls[start:start + 100]))
    assert replica_a.pending_settles == replica_b.pending_settles == 0
    report = await replica_a.usage(tenant, days=1)
    day = report["days"][0]
    assert day["spend_micro_usd"] == expected == report["month_spend_micro_usd"]
    assert sum(t["cost_micro"] for t in day["tiers"].values()) == expected
    assert {name: t["requests"] for name, t in day["tiers"].items()} == per_tier
    logged = read_records([replica_a.usage_log.path, replica_b.usage_log.path])
    assert len(logged) == 1000 and len({r.request_id for r in logged}) == 1000
    assert sum(r.cost_micro for r in logged) == expected


async def test_duplicate_settle_with_different_usage_is_ignored(make_service):
    service = make_service({"acme": {"keys": ["k"]}})
    tenant = service.authenticate("Bearer k")
    admission = await service.admit(tenant, "r1", 10, 10)
    await service.settle(admission, "r1", "expert", 1000, 1000)
    await service.settle(admission, "r1", "expert", 9999, 9999)   # an escalation retry settling again
    report = await service.usage(tenant, days=1)
    assert report["days"][0]["spend_micro_usd"] == 40_000


async def test_soft_budget_downgrades_then_hard_budget_blocks_with_429(make_service):
    service = make_service({"acme": {"keys": ["k"], "budgets": {"daily_usd": {"soft": 0.03, "hard": 0.05}}}})
    tenant = service.authenticate("Bearer k")
    assert service.decide(tenant, RouteRequest("auto", Signal(3)), TIERS).tier_name == "large"
    admission = await service.admit(tenant, "r1", 1000, 100)
    await service.settle(admission, "r1", "expert", 1000, 1000)          # 0.04 USD: past soft
    decision = service.decide(tenant, RouteRequest("auto", Signal(3), explain=True), TIERS)
    budget = [s.detail for s in decision.steps if s.kind is StepKind.SOFT_BUDGET]
    assert decision.tier_name == "medium" and decision.routed_by is RoutedBy.POLICY
    assert budget[0]["reason"].startswith("daily soft budget 0.03") and budget[0]["to"] == "medium"
    admission = await service.admit(tenant, "r2", 10, 100)               # still under hard: admitted
    await service.settle(admission, "r2", "expert", 1000, 0)             # 0.05 USD: hard reached
    with pytest.raises(OpenAIError) as err:
        await service.admit(tenant, "r3", 10, 100)
    assert err.value.status == 429 and err.value.code == "budget_exceeded"
    assert 1 <= int(err.value.headers["Retry-After"]) <= 86400
    assert err.value.body()["error"]["type"] == "rate_limit_error"


async def test_monthly_hard_budget_blocks_too(make_service):
    service = make_service({"acme": {"keys": ["k"], "budgets": {"monthly_usd": {"hard": 0.000002}}}})
    tenant = service.authenticate("Bearer k")
    # its worst case on small is 1 micro-USD; settled it costs 2
    await service.settle(await service.admit(tenant, "r1", 1, 1, tiers=["small"]), "r1", "small", 10, 5)
    with pytest.raises(OpenAIError) as err:
        await service.admit(tenant, "r2", 1, 1)
    assert err.value.code == "budget_exceeded" and "monthly" in err.value.message


async def test_usage_shows_when_each_budget_period_starts_again(make_service):
    from datetime import datetime, timezone

    service = make_service({"acme": {"keys": ["k"]}})
    service.clock = lambda: datetime(2026, 12, 31, 23, 59, 30, tzinfo=timezone.utc)
    report = await service.usage(service.authenticate("Bearer k"), days=1)
    assert report["resets_at"] == {"daily": "2027-01-01T00:00:00Z", "weekly": "2027-01-04T00:00:00Z",
                                  "monthly": "2027-01-01T00:00:00Z"}
    service.clock = lambda: datetime(2026, 2, 10, 8, 0, tzinfo=timezone.utc)
    report = await service.usage(service.authenticate("Bearer k"), days=1)
    assert report["resets_at"] == {"daily": "2026-02-11T00:00:00Z", "weekly": "2026-02-16T00:00:00Z",
                                  "monthly": "2026-03-01T00:00:00Z"}


async def test_periods_begin_at_midnight_in_the_configured_time_zone(make_service):
    from datetime import datetime

    from zoneinfo import ZoneInfo

    service = make_service({"acme": {"keys": ["k"], "budgets": {"daily_usd": {"hard": 0.03}}}},
                           timezone="America/New_York")
    tenant = service.authenticate("Bearer k")
    # 23:30 in New York on Nov 30 is Dec 1 in UTC: the spend belongs to New York's Nov 30
    evening = datetime(2026, 11, 30, 23, 30, tzinfo=ZoneInfo("America/New_York"))
    service.clock = lambda: evening
    admission = await service.admit(tenant, "r1", 1000, 100)
    await service.settle(admission, "r1", "expert", 1000, 1000)  # 0.04 USD: past the daily hard budget
    report = await service.usage(tenant, days=1)
    assert [d["date"] for d in report["days"]] == ["2026-11-30"] and report["month"] == "2026-11"
    assert report["resets_at"] == {"daily": "2026-12-01T05:00:00Z", "weekly": "2026-12-07T05:00:00Z",
                                  "monthly": "2026-12-01T05:00:00Z"}
    with pytest.raises(OpenAIError) as refused:
        await service.admit(tenant, "r2", 10, 10)
    assert refused.value.code == "budget_exceeded" and refused.value.headers["Retry-After"] == "1800"
    service.clock = lambda: datetime(2026, 12, 1, 0, 5, tzinfo=ZoneInfo("America/New_York"))  # a new local day
    await service.admit(tenant, "r3", 10, 10)


def test_a_period_that_spans_a_daylight_saving_change_ends_at_local_midnight():
    from datetime import datetime, timezone

    from zoneinfo import ZoneInfo

    from policies.periods import next_reset

    paris = ZoneInfo("Europe/Paris")  # 2026-10-25 03:00 CEST becomes 02:00 CET: a 25-hour day
    assert next_reset(datetime(2026, 10, 25, 1, 0, tzinfo=paris), "daily") == \
        datetime(2026, 10, 25, 23, 0, tzinfo=timezone.utc)
    assert next_reset(datetime(2026, 3, 10, 9, 0, tzinfo=paris), "monthly") == \
        datetime(2026, 3, 31, 22, 0, tzinfo=timezone.utc)  # April begins in summer time
