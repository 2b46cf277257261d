"""This replica's own limits for while Redis is unreachable and `on_redis_error` is open: per
tenant (and key) token buckets for requests and tokens per minute, and hard budgets held against
the last spend this replica saw plus its own live reservations. Each replica limits alone, so an
outage means limits that are approximate (up to one limit per replica), never none."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from policies.config import RateLimits
from policies.periods import PERIODS
from policies.store import ADMITTED, OVER_BUDGET, RATE_LIMITED, AdmitResult, Spend, key_budgets_of

WINDOW_S = 60.0


@dataclass
class _Bucket:
    """Capacity one minute's limit, refilled at limit per minute; may go into debt (like admit.lua)."""
    limit: int
    level: float
    at: float

    def level_now(self, now: float) -> float:
        return min(self.limit, self.level + (now - self.at) * self.limit / WINDOW_S)

    def wait_ms(self, now: float, need: int) -> int:
        short = min(need, self.limit) - self.level_now(now)
        return 0 if short <= 0 else max(1, int(short * WINDOW_S * 1000 / self.limit) + 1)

    def take(self, now: float, amount: int) -> None:
        self.level, self.at = self.level_now(now) - amount, now


@dataclass
class LocalLimits:
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[tuple[str, str, str], _Bucket] = field(default_factory=dict)
    _held: dict[tuple[str, str | None], dict[str, int]] = field(default_factory=dict)  # (tenant, key) -> id -> µUSD

    def _bucket(self, owner: tuple[str, str], kind: str, limit: int, now: float) -> _Bucket:
        bucket = self._buckets.get((*owner, kind))
        if bucket is None or bucket.limit != limit:  # new, or the limit changed with a reload
            bucket = self._buckets[(*owner, kind)] = _Bucket(limit, float(limit), now)
        return bucket

    def admit(self, tenant, limits: tuple[RateLimits, RateLimits], request_id: str, charge_tokens: int,
              cost_micro: int, spent: tuple[Spend, Spend]) -> AdmitResult:
        """admit.lua's rules on this replica's memory; `spent`: the last spend seen of the tenant and
        of its key."""
        mine, key_spend = spent
        owners = (((tenant.name, None), tenant.policy.budgets, mine, ""),
                  ((tenant.name, tenant.key_id), key_budgets_of(tenant), key_spend, "key_"))

        def result(status: int, wait: int, what: str) -> AdmitResult:
            return AdmitResult(status, wait, mine.daily, mine.monthly, what, mine.weekly, key_spend)

        for owner, budgets, spend, whose in owners:
            reserved = sum(self._held.get(owner, {}).values())
            for period in PERIODS:
                hard, amount = budgets.amount(period, "hard"), spend.of(period)
                if hard is not None and (amount >= hard or amount + reserved + cost_micro > hard):
                    return result(OVER_BUDGET, 0 if amount + cost_micro > hard else 1000, whose + period)
        now = self.clock()
        wanted = []
        for (name, own), rate in zip(((tenant.name, "-"), (tenant.name, tenant.key_id or "-")), limits):
            for kind, limit, need in (("requests_per_minute", rate.requests_per_minute, 1),
                                      ("tokens_per_minute", rate.tokens_per_minute, charge_tokens)):
                if limit:
                    bucket = self._bucket((name, own), kind, limit, now)
                    wait = bucket.wait_ms(now, need)
                    if wait:
                        return result(RATE_LIMITED, wait, f"{'tenant' if own == '-' else 'key'}_{kind}")
                    wanted.append((bucket, need))
        for bucket, need in wanted:
            bucket.take(now, need)
        for owner, budgets, _, _ in owners:
            if budgets.hard and cost_micro:
                self._held.setdefault(owner, {})[request_id] = cost_micro
        return result(ADMITTED, 0, "")

    def release(self, tenant_name: str, key_id: str | None, request_id: str) -> None:
        for owner in ((tenant_name, None), (tenant_name, key_id)):
            self._held.get(owner, {}).pop(request_id, None)
