"""Reservations live as long as the work: while a request this replica admitted still runs (a
stream, a long answer, its failover), its reservation's expiry is pushed forward every third of
its lifetime, so it never stops counting against the hard budgets while tokens are generated.

Renewal rather than a total limit on streams: a long answer stays possible, and a gateway that
crashed stops renewing, so its reservations still expire one lifetime later. Held weakly: a
request whose settle never ran (its handler failed) stops being renewed once it is gone.
"""
from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any, Awaitable, Callable

log = logging.getLogger(__name__)

Renew = Callable[[Any, list[str]], Awaitable[Any]]  # (the admission's tenant, reservation ids): one Redis call


class Renewals:
    def __init__(self, renew: Renew, ttl_s: float):
        self.renew, self.interval_s = renew, ttl_s / 3
        self._live: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        self._task: asyncio.Task | None = None

    def __len__(self) -> int:
        return len(self._live)

    def hold(self, reservation_id: str, admission: Any) -> None:
        """Renew `reservation_id` until `release` (or until `admission` is gone)."""
        self._live[reservation_id] = admission
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._task = loop.create_task(self._run())

    def release(self, reservation_id: str) -> None:
        self._live.pop(reservation_id, None)

    async def _run(self) -> None:
        while self._live:
            await asyncio.sleep(self.interval_s)
            by_owner: dict[tuple[str, str | None], tuple[Any, list[str]]] = {}  # a key may hold its own too
            for reservation_id, admission in list(self._live.items()):
                tenant = admission.tenant
                by_owner.setdefault((tenant.name, tenant.key_id), (tenant, []))[1].append(reservation_id)
            for tenant, ids in by_owner.values():
                try:
                    await self.renew(tenant, ids)
                except Exception as exc:  # Redis away: renewed at the next tick, or they expire
                    log.warning("could not renew %d reservation(s) of tenant %s: %s", len(ids), tenant.name, exc)

    def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
