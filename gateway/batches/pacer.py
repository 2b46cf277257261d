"""How many batch lines may be in flight on a tier's workers: `max_in_flight_per_worker` for
each healthy worker. Tiers served by the same workers share one count, since it is the
workers' spare capacity being used."""
from __future__ import annotations

import asyncio
from collections import Counter
from contextlib import asynccontextmanager


class Pacer:
    def __init__(self, current):
        self.current = current  # the process's services snapshot now
        self.in_flight: Counter[tuple[str, ...]] = Counter()
        self._changed = asyncio.Condition()

    def _workers(self, tier) -> tuple[tuple[str, ...], int]:
        services = self.current()
        pool = services.upstreams.pools.by_tier.get(tier.name)
        backends = pool.backends if pool is not None else []
        healthy = sum(1 for b in backends if b.healthy)
        per_worker = services.config.batches.max_in_flight_per_worker
        return tuple(sorted(b.url for b in backends)), per_worker * max(1, healthy)

    @asynccontextmanager
    async def slot(self, tier):
        """Wait until the tier's workers have room for one more batch line, and hold it."""
        workers, _ = self._workers(tier)
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight[workers] < self._workers(tier)[1])
            self.in_flight[workers] += 1
        try:
            yield
        finally:
            async with self._changed:
                self.in_flight[workers] -= 1
                self._changed.notify_all()
