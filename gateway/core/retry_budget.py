"""A retry budget (Envoy's and Finagle's idea): over the last WINDOW_S seconds, retries may be
at most a share of the requests plus a small reserve per second. A burst of failures (a worker
killed under load) spends credit earned by earlier traffic; a failure rate sustained above the
share is cut back, so failing workers are not hit by a multiple of the load."""
from __future__ import annotations

import time
from collections import deque

from ..config import Failover

WINDOW_S = 10


class RetryBudget:
    """Per gateway process: counts of requests and retries, one slot per second of the window."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.slots: deque[list[int]] = deque()  # [second, requests, retries]
        self.requests = 0
        self.retries = 0

    def _slot(self) -> list[int]:
        now = int(self.clock())
        while self.slots and self.slots[0][0] <= now - WINDOW_S:
            _, requests, retries = self.slots.popleft()
            self.requests -= requests
            self.retries -= retries
        if not self.slots or self.slots[-1][0] != now:
            self.slots.append([now, 0, 0])
        return self.slots[-1]

    def on_request(self) -> None:
        self._slot()[1] += 1
        self.requests += 1

    def try_retry(self, failover: Failover) -> bool:
        """Spend one retry if the budget has room."""
        slot = self._slot()
        room = self.requests * failover.retry_budget_percent / 100 + failover.min_retries_per_s * WINDOW_S
        if self.retries + 1 > room:
            return False
        slot[2] += 1
        self.retries += 1
        return True
