"""Which budget thresholds a spend has reached, and the alert ids every replica derives alike."""
from __future__ import annotations

from policies.alerts.thresholds import crossings
from policies.budgets import Budgets

PERCENTS = (50, 80, 100)


def test_each_reached_threshold_of_each_budget_and_only_those():
    budgets = Budgets(daily_hard=1000, monthly_soft=10_000)  # monthly: its soft amount (no hard)
    found = crossings("t", budgets, {"daily": ("2026-12-01", 850), "monthly": ("2026-12", 5000)}, PERCENTS)
    assert [(c.budget, c.percent, c.amount_micro) for c in found] == [
        ("daily", 50, 1000), ("daily", 80, 1000), ("monthly", 50, 10_000)]
    assert crossings("t", budgets, {"daily": ("2026-12-01", 499), "monthly": ("2026-12", 0)}, PERCENTS) == []
    assert crossings("t", Budgets(), {"daily": ("2026-12-01", 10**9)}, PERCENTS) == []  # no budget: no alert


def test_alert_ids_name_tenant_budget_period_and_threshold():
    one = crossings("t", Budgets(daily_hard=100), {"daily": ("2026-12-01", 100)}, PERCENTS)
    again = crossings("t", Budgets(daily_hard=100), {"daily": ("2026-12-01", 120)}, PERCENTS)
    next_day = crossings("t", Budgets(daily_hard=100), {"daily": ("2026-12-02", 100)}, PERCENTS)
    other = crossings("u", Budgets(daily_hard=100), {"daily": ("2026-12-01", 100)}, PERCENTS)
    ids = [c.id for c in one]
    assert ids == [c.id for c in again] and len(set(ids)) == 3  # the same on every settle and replica
    assert not set(ids) & {c.id for c in next_day + other}
