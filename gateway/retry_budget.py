"""Envoy's retry budget: retries in flight stay below a share of the requests in flight, so a
burst of failing requests cannot multiply itself into a retry storm against the workers."""
from __future__ import annotations

from .config import Failover


class RetryBudget:
    """Per gateway process; `active` counts requests opening an upstream, `retrying` those of
    them on a second or later attempt."""

    def __init__(self):
        self.active = 0
        self.retrying = 0

    def allows(self, failover: Failover) -> bool:
        return self.retrying < max(failover.min_retry_concurrency, self.active * failover.retry_budget_percent / 100)
