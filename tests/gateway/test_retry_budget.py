"""RetryBudget: retries over the last window are a share of the requests plus a reserve per
second, on a clock the test moves."""
from __future__ import annotations

from gateway.config import Failover
from gateway.core.retry_budget import WINDOW_S, RetryBudget


def test_retry_budget_is_a_share_of_recent_requests_plus_a_reserve():
    now = [100.0]
    budget = RetryBudget(clock=lambda: now[0])
    policy = Failover(retry_budget_percent=20, min_retries_per_s=0.5)  # reserve: 5 retries per window
    assert sum(budget.try_retry(policy) for _ in range(10)) == 5  # a quiet gateway still fails over
    for _ in range(50):
        budget.on_request()
    assert sum(budget.try_retry(policy) for _ in range(20)) == 10  # 20% of 50 on top of the reserve
    now[0] += WINDOW_S  # everything counted has left the window
    assert sum(budget.try_retry(policy) for _ in range(10)) == 5
