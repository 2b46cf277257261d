"""Which budget thresholds a tenant's spend has reached. Pure: the settle's spend in, crossings out."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from policies.config import Budgets


@dataclass(frozen=True)
class Crossing:
    tenant: str
    budget: str        # daily | monthly
    period: str        # the period's label: 2026-12-01 | 2026-12
    percent: int
    amount_micro: int  # the budget the percentage is of
    spend_micro: int   # the spend that reached it

    @property
    def id(self) -> str:
        """The same on every replica: the webhook's idempotency id and the Redis marker's name."""
        digest = hashlib.sha256(f"{self.tenant}|{self.budget}|{self.period}|{self.percent}".encode()).hexdigest()
        return "alert_" + digest[:24]


def _amount(soft: int | None, hard: int | None) -> int | None:
    return hard if hard is not None else soft


def crossings(tenant: str, budgets: Budgets, periods: dict[str, tuple[str, int]],
              percents: tuple[int, ...]) -> list[Crossing]:
    """`periods`: budget -> (period label, settled spend). Every threshold the spend has reached."""
    amounts = {"daily": _amount(budgets.daily_soft, budgets.daily_hard),
               "monthly": _amount(budgets.monthly_soft, budgets.monthly_hard)}
    found = []
    for budget, (period, spend) in periods.items():
        amount = amounts.get(budget)
        if not amount:
            continue
        found += [Crossing(tenant, budget, period, p, amount, spend) for p in percents if spend * 100 >= amount * p]
    return found
