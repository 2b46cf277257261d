"""Which budget thresholds a tenant's spend has reached. Pure: the settle's spend in, crossings out."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from policies.budgets import Budgets


@dataclass(frozen=True)
class Crossing:
    tenant: str
    budget: str        # daily | weekly | monthly
    period: str        # the period's label: 2026-12-01 | 2026-11-30 (the week's first day) | 2026-12
    percent: int
    amount_micro: int  # the budget the percentage is of
    spend_micro: int   # the spend that reached it
    key_id: str | None = None  # a key's own budget; None: the tenant's

    @property
    def id(self) -> str:
        """The same on every replica: the webhook's idempotency id and the Redis marker's name."""
        whose = f"|key:{self.key_id}" if self.key_id else ""
        digest = hashlib.sha256(f"{self.tenant}|{self.budget}|{self.period}|{self.percent}{whose}".encode()).hexdigest()
        return "alert_" + digest[:24]

    @property
    def label(self) -> str:
        """The budget as metrics and logs name it (key ids stay out of metric labels)."""
        return f"key_{self.budget}" if self.key_id else self.budget


def _amount(soft: int | None, hard: int | None) -> int | None:
    return hard if hard is not None else soft


def crossings(tenant: str, budgets: Budgets, periods: dict[str, tuple[str, int]],
              percents: tuple[int, ...], key_id: str | None = None) -> list[Crossing]:
    """`periods`: budget -> (period label, settled spend). Every threshold the spend has reached
    (of the tenant's budgets, or with `key_id` of that key's own)."""
    found = []
    for budget, (period, spend) in periods.items():
        amount = _amount(budgets.amount(budget, "soft"), budgets.amount(budget, "hard"))
        if not amount:
            continue
        found += [Crossing(tenant, budget, period, p, amount, spend, key_id)
                  for p in percents if spend * 100 >= amount * p]
    return found
