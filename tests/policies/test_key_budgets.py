"""Budgets per key beside the tenant's, and weekly periods, on the real Redis: a key's hard budget
refuses while its tenant has room and the other way round (the refusal names which), a settle
charges both once, weeks begin at local midnight of policy.week_start, the ledger rebuilt from the
usage log holds the week and each key's spend, and a key's thresholds alert once per period."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from policies.alerts.deliverer import BudgetAlerts
from policies.alerts.store import AlertStore
from policies.config import AlertSettings
from policies.periods import next_reset, periods_at
from policies.rebuild import rebuild_ledger
from policies.local_limits import LocalLimits
from policies.store import ADMITTED, OVER_BUDGET, Spend, limits_of
from wire.errors import OpenAIError

TOKYO = ZoneInfo("Asia/Tokyo")
SPENT = 40_000  # micro-USD: 1,000 prompt and 1,000 completion tokens on expert
BIG = 1000      # max_tokens whose worst case on expert (30,100 micro-USD) cannot fit after SPENT in 0.05


async def _spend(service, tenant, request_id: str) -> None:
    await service.settle(await service.admit(tenant, request_id, 10, 10), request_id, "expert", 1000, 1000)


async def _refused(service, tenant, request_id: str) -> OpenAIError:
    with pytest.raises(OpenAIError) as refused:
        await service.admit(tenant, request_id, 10, BIG)
    assert refused.value.status == 429 and refused.value.code == "budget_exceeded"
    return refused.value


async def test_a_keys_budget_refuses_while_its_tenant_has_room(make_service):
    service = make_service({"acme": {"keys": ["ka", "kb"], "budgets": {"daily_usd": {"hard": 1.0}},
                                     "key_budgets": {"k0": {"daily_usd": {"hard": 0.05}}}}})
    capped, other = service.authenticate("Bearer ka"), service.authenticate("Bearer kb")
    await _spend(service, capped, "r1")
    refused = await _refused(service, capped, "r2")
    assert refused.message.startswith("key_daily hard budget of key 'k0' of tenant 'acme'")
    await service.admit(other, "r3", 10, BIG)  # the tenant's other key: the tenant has room


async def test_the_tenants_budget_refuses_while_the_key_has_room(make_service):
    service = make_service({"acme": {"keys": ["ka", "kb"], "budgets": {"weekly_usd": {"hard": 0.05}},
                                     "key_budgets": {"k0": {"weekly_usd": {"hard": 10}}}}})
    await _spend(service, service.authenticate("Bearer kb"), "r1")
    refused = await _refused(service, service.authenticate("Bearer ka"), "r2")
    assert refused.message.startswith("weekly hard budget of tenant 'acme'")


async def test_a_settle_charges_the_tenant_and_the_key_once_and_releases_both_holds(make_service):
    tenants = {"acme": {"keys": ["ka"], "budgets": {"monthly_usd": {"hard": 5}},
                        "key_budgets": {"k0": {"weekly_usd": {"hard": 1}}}}}
    a, b = make_service(tenants), make_service(tenants)  # two replicas
    tenant = a.authenticate("Bearer ka")
    admission = await a.admit(tenant, "r1", 10, 10)
    keys = a.store.keys
    for owner in (None, "k0"):
        assert int(await a.store.redis.hget(keys.reserved_amounts("acme", owner), "#total")) == 400
    for replica in (a, a, b):  # a retried settle, and the same request settled by another replica
        await replica.settle(admission, "r1", "expert", 1000, 1000)
    periods = a.periods()
    assert await a.store.spend_of("acme", periods) == Spend(SPENT, SPENT, SPENT)
    assert await a.store.spend_of("acme", periods, "k0") == Spend(SPENT, SPENT, SPENT)
    for owner in (None, "k0"):
        assert int(await a.store.redis.hget(keys.reserved_amounts("acme", owner), "#total")) == 0
    report = await a.usage(tenant, days=1)
    assert report["spend"]["weekly"]["micro_usd"] == SPENT
    assert report["key"] == {"id": "k0", "spend": report["spend"], "budgets": {"weekly_usd": {"hard": 1.0}}}


async def test_a_weekly_budget_resets_at_local_midnight_of_its_first_day(make_service):
    service = make_service({"acme": {"keys": ["ka"], "budgets": {"weekly_usd": {"hard": 0.05}}}},
                           timezone="Asia/Tokyo")
    tenant = service.authenticate("Bearer ka")
    sunday_night = datetime(2026, 12, 6, 23, 30, tzinfo=TOKYO)  # 14:30 UTC
    service.clock = lambda: sunday_night
    await _spend(service, tenant, "r1")
    refused = await _refused(service, tenant, "r2")
    assert refused.headers["Retry-After"] == "1800"  # the week ends at Monday 00:00 in Tokyo
    report = await service.usage(tenant, days=1)
    assert report["week"] == "2026-11-30" and report["resets_at"]["weekly"] == "2026-12-06T15:00:00Z"
    assert report["spend"]["weekly"]["micro_usd"] == SPENT
    service.clock = lambda: datetime(2026, 12, 7, 0, 5, tzinfo=TOKYO)  # a new local week (UTC: still Dec 6)
    await service.admit(tenant, "r3", 10, BIG)
    assert (await service.usage(tenant, days=1))["spend"]["weekly"]["micro_usd"] == 0


def test_week_start_moves_the_weeks_first_day():
    sunday = datetime(2026, 12, 6, 23, 30, tzinfo=TOKYO)
    assert periods_at(sunday).week == "2026-11-30"          # Monday weeks (the default)
    assert periods_at(sunday, 6).week == "2026-12-06"       # Sunday weeks
    assert next_reset(sunday, "weekly", 6) == datetime(2026, 12, 12, 15, 0, tzinfo=timezone.utc)


async def test_week_start_is_a_weekday_name(make_service):
    from typedconfig import ConfigError
    with pytest.raises(ConfigError, match="week_start"):
        make_service({"acme": {"keys": ["ka"]}}, week_start="someday")


async def test_the_rebuilt_ledger_holds_the_week_and_each_keys_spend(make_service):
    service = make_service({"acme": {"keys": ["ka", "kb"]}}, timezone="Asia/Tokyo")
    ka, kb = service.authenticate("Bearer ka"), service.authenticate("Bearer kb")
    service.clock = lambda: datetime(2026, 12, 6, 23, 0, tzinfo=TOKYO)  # the week of Nov 30
    await _spend(service, ka, "r1")
    service.clock = lambda: datetime(2026, 12, 7, 1, 0, tzinfo=TOKYO)   # the week of Dec 7
    await _spend(service, ka, "r2")
    await _spend(service, kb, "r3")
    store, periods = service.store, periods_at(service.clock())
    before = [await store.spend_of("acme", periods, key) for key in (None, "k0", "k1")]
    for key in await store.redis.keys(store.keys.tenant_pattern("acme")):
        if b":spend:" in key:
            await store.redis.delete(key)  # Redis lost the ledger
    summary = await rebuild_ledger(store, [service.usage_log.path])
    assert summary["tenant_weeks"] == 2
    assert [await store.spend_of("acme", periods, key) for key in (None, "k0", "k1")] == before == [
        Spend(2 * SPENT, 2 * SPENT, 3 * SPENT), Spend(SPENT, SPENT, 2 * SPENT), Spend(SPENT, SPENT, SPENT)]
    assert int(await store.redis.get(store.keys.spend_week("acme", "2026-11-30"))) == SPENT


async def test_a_keys_thresholds_alert_once_per_period(make_service, shared_redis):
    client, prefix = shared_redis
    tenants = {"acme": {"keys": ["ka", "kb"], "key_budgets": {"k0": {"daily_usd": {"soft": 0.1}},
                                                             "k1": {"daily_usd": {"soft": 0.1}}}}}
    replicas = [make_service(tenants), make_service(tenants)]
    store = AlertStore(client, prefix)
    day = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
    for replica in replicas:
        replica.alerts = BudgetAlerts(store, AlertSettings(thresholds_percent=(50, 80)))
        replica.clock = lambda: day
    # 0.32 USD per key, settled concurrently on two replicas: past 50% and 80% of 0.1 many times over
    await asyncio.gather(*(_spend(replica, replica.authenticate(f"Bearer {key}"), f"r{n}-{key}-{i}")
                           for n in range(4) for i, replica in enumerate(replicas) for key in ("ka", "kb")))
    alerts = await store.page(100, None)
    assert sorted((a["key_id"], a["budget"], a["percent"]) for a in alerts) == [
        ("k0", "daily", 50), ("k0", "daily", 80), ("k1", "daily", 50), ("k1", "daily", 80)]
    assert {a["period"] for a in alerts} == {"2026-12-01"}
    next_day = datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc)
    replicas[0].clock = lambda: next_day
    for n in range(2):  # 0.08 USD: 50% and 80% of the new day's budget
        await _spend(replicas[0], replicas[0].authenticate("Bearer ka"), f"r-next-{n}")
    fresh = [a for a in await store.page(100, None) if a["period"] == "2026-12-02"]
    assert sorted((a["key_id"], a["percent"]) for a in fresh) == [("k0", 50), ("k0", 80)]


async def test_a_running_requests_hold_on_its_keys_budget_is_renewed(make_service):
    service = make_service({"acme": {"keys": ["ka"], "key_budgets": {"k0": {"daily_usd": {"hard": 1}}}}})
    tenant = service.authenticate("Bearer ka")
    await service.admit(tenant, "r1", 10, 10)
    redis, keys = service.store.redis, service.store.keys
    await redis.zadd(keys.reservations("acme", "k0"), {"r1": 1})  # about to expire
    await service.renewals.renew(tenant, ["r1"])  # what the renewal loop calls for a running request
    assert await redis.zscore(keys.reservations("acme", "k0"), "r1") > 1e12
    assert await redis.zscore(keys.reservations("acme"), "r1") is None  # the tenant has no hard budget


async def test_without_redis_a_keys_budget_is_held_by_this_replicas_own_limits(make_service):
    service = make_service({"acme": {"keys": ["ka"], "key_budgets": {"k0": {"daily_usd": {"hard": 0.05}}}}})
    tenant = service.authenticate("Bearer ka")
    local = LocalLimits()
    first = local.admit(tenant, limits_of(tenant), "r1", 10, 20_000, (Spend(), Spend(20_000, 20_000, 20_000)))
    second = local.admit(tenant, limits_of(tenant), "r2", 10, 20_000, (Spend(), Spend(20_000, 20_000, 20_000)))
    assert first.status == ADMITTED and (second.status, second.what) == (OVER_BUDGET, "key_daily")
    local.release("acme", "k0", "r1")
    assert local.admit(tenant, limits_of(tenant), "r3", 10, 20_000,
                       (Spend(), Spend(20_000, 20_000, 20_000))).status == ADMITTED


async def test_past_a_keys_soft_budget_routing_goes_one_tier_cheaper(make_service):
    from policies.decision_types import RouteRequest, Signal, StepKind
    from tests.policies.policy_helpers import TIERS

    service = make_service({"acme": {"keys": ["ka", "kb"], "key_budgets": {"k0": {"weekly_usd": {"soft": 0.03}}}}})
    soft, other = service.authenticate("Bearer ka"), service.authenticate("Bearer kb")
    assert service.decide(soft, RouteRequest("auto", Signal(3)), TIERS).tier_name == "large"
    await _spend(service, soft, "r1")  # 0.04 USD: past the key's weekly soft budget
    decision = service.decide(soft, RouteRequest("auto", Signal(3), explain=True), TIERS)
    step = next(s.detail for s in decision.steps if s.kind is StepKind.SOFT_BUDGET)
    assert decision.tier_name == "medium" and step["reason"].startswith("key's weekly soft budget 0.03")
    assert service.decide(other, RouteRequest("auto", Signal(3)), TIERS).tier_name == "large"  # not the tenant's
