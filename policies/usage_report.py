"""`/v1/usage`: a tenant's spend per day, per period and (for a key) its own, with when each
period starts again; the admin key gets every tenant."""
from __future__ import annotations

from datetime import timedelta
from typing import Any, Awaitable, Callable, Protocol

from policies.config import Tenant
from policies.costs import micro_to_usd
from policies.periods import PERIODS, next_reset, periods_at
from policies.redis_errors import RedisUnavailable
from policies.store import Spend, key_budgets_of
from wire.errors import OpenAIError

class Ledger(Protocol):
    """What the report reads of the policy service."""
    keyring: Any
    store: Any
    week_start: int

    def clock(self) -> Any: ...

    async def call_redis(self, operation: str, call: Callable[[], Awaitable[Any]]) -> Any: ...


async def usage_report(service: Ledger, tenant: Tenant, days: int = 7, by_tag: bool = False) -> dict:
    """The caller's own usage; the admin key gets every configured tenant. `by_tag`: each
    day's figures per tag as well (`tags`)."""
    days = min(max(int(days), 1), 366)
    now = service.clock()
    dates = [(now - timedelta(days=i)).strftime("%Y-%m-%d") for i in range(days)]
    names = service.keyring.tenant_names() if tenant.is_admin else [tenant.name]
    try:
        reports = [await service.call_redis("usage", lambda n=n: service.store.usage(n, dates, now.strftime("%Y-%m"),
                                                                             by_tag))
                   for n in names]
    except RedisUnavailable:
        raise _unavailable() from None
    resets = {what: next_reset(now, what, service.week_start).strftime("%Y-%m-%dT%H:%M:%SZ") for what in PERIODS}
    periods = periods_at(now, service.week_start)
    for report in reports:
        report["resets_at"] = resets  # when the day's, the week's and the month's spend start again from 0
        report["week"] = periods.week
        report["month_spend_usd"] = micro_to_usd(report["month_spend_micro_usd"])
        for day in report["days"]:
            day["spend_usd"] = micro_to_usd(day["spend_micro_usd"])
    try:  # the current periods' spend: of each tenant, and of the caller's own key
        for report in reports:
            report["spend"] = _spend_report(await service.call_redis(
                "usage", lambda r=report: service.store.spend_of(r["tenant"], periods)))
        if not tenant.is_admin and tenant.key_id:
            key_spend = await service.call_redis("usage", lambda: service.store.spend_of(tenant.name, periods,
                                                                                     tenant.key_id))
            reports[0]["key"] = {"id": tenant.key_id, "spend": _spend_report(key_spend),
                                 "budgets": _budgets_report(key_budgets_of(tenant))}
    except RedisUnavailable:
        raise _unavailable() from None
    if tenant.is_admin:
        return {"object": "usage.list", "data": reports}
    return {"object": "usage", **reports[0]}


def _unavailable() -> OpenAIError:
    return OpenAIError(503, "usage store unavailable; try again shortly", code="service_unavailable",
                       headers={"Retry-After": "1"})


def _spend_report(spend: Spend) -> dict:
    return {p: {"micro_usd": spend.of(p), "usd": micro_to_usd(spend.of(p))} for p in PERIODS}


def _budgets_report(budgets: Any) -> dict:
    return {f"{p}_usd": {kind: micro_to_usd(amount) for kind in ("soft", "hard")
                         if (amount := budgets.amount(p, kind)) is not None}
            for p in PERIODS if budgets.amount(p, "soft") is not None or budgets.amount(p, "hard") is not None}
