"""Budgets in USD per period (daily, weekly, monthly; soft and hard), held as integer micro-dollars,
for tenants and for keys alike."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from policies.costs import usd_to_micro
from policies.periods import PERIODS
from typedconfig import Fields

def _budget_pair(f: Fields) -> tuple[int | None, int | None]:
    soft, hard = f.number("soft", None, minimum=0), f.number("hard", None, minimum=0)
    f.finish()
    try:
        pair = (None if soft is None else usd_to_micro(soft), None if hard is None else usd_to_micro(hard))
    except ValueError as exc:
        f.fail(None, str(exc))
    if pair[0] is not None and pair[1] is not None and pair[0] > pair[1]:
        f.fail("soft", "must not exceed hard")
    return pair


def read_budgets(f: Fields, key: str) -> "Budgets":
    b = f.child(key)
    day, week, month = (_budget_pair(b.child(f"{period}_usd")) for period in PERIODS)
    b.finish()
    return Budgets(day[0], day[1], month[0], month[1], week[0], week[1])


def parse_budgets(raw: Any, source: str) -> "Budgets":
    """A `budgets` mapping read alone (an admin API body's), errors naming `budgets.<field>`."""
    return read_budgets(Fields({"budgets": raw}, "", source), "budgets")


@dataclass(frozen=True)
class Budgets:
    """All amounts in integer micro-dollars; None = no such budget."""
    daily_soft: int | None = None
    daily_hard: int | None = None
    monthly_soft: int | None = None
    monthly_hard: int | None = None
    weekly_soft: int | None = None
    weekly_hard: int | None = None

    def amount(self, period: str, kind: str) -> int | None:
        """`period`: daily | weekly | monthly; `kind`: soft | hard."""
        return getattr(self, f"{period}_{kind}")

    @functools.cached_property  # read several times a request; a Budgets never changes
    def hard(self) -> bool:
        return any(self.amount(p, "hard") is not None for p in PERIODS)

    @functools.cached_property
    def soft(self) -> bool:
        return any(self.amount(p, "soft") is not None for p in PERIODS)

    @functools.cached_property
    def any(self) -> bool:
        return self.hard or self.soft


BUDGETS_DOC = ("{daily_usd, weekly_usd, monthly_usd: {soft, hard}} in USD; periods begin at midnight in "
               "policy.timezone, weeks on policy.week_start.")

