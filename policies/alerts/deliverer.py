"""Budget alerts from this replica's settles, and their delivery.

A settle whose spend reached a threshold asks Redis once to create the alert (this replica
remembers the ids it asked about, so later settles cost nothing). Every replica runs the
delivery loop: it claims due deliveries under a lease of the POST's timeout plus 5 s, posts
them, and records the outcome; a failed POST is tried again after 1, 2, 4 ... s (at most 5 min
apart) up to `max_attempts`. A replica that dies mid-delivery records nothing: at the end of the
lease another replica claims the alert and posts it again, with the same idempotency id."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from policies import metrics
from policies.alerts import webhook
from policies.alerts.store import AlertStore
from policies.alerts.thresholds import Crossing, crossings
from policies.config import AlertSettings, Tenant
from policies.periods import PERIODS, Periods
from policies.process_wide import one_per_redis
from policies.store import Spend, key_budgets_of

log = logging.getLogger(__name__)
POLL_S = 0.5
MAX_BACKOFF_S = 300
REMEMBERED = 10_000  # alert ids this replica asked about; past it, start over (a repeat ask is harmless)


class BudgetAlerts:
    def __init__(self, store: AlertStore, settings: AlertSettings):
        self.store, self.settings = store, settings
        self._asked: set[str] = set()

    def unasked(self, tenant: Tenant, periods: Periods, spend: Spend, key_spend: Spend) -> list[Crossing]:
        """The thresholds the settled spend (the tenant's, and its key's against the key's own budgets)
        reached that this replica has not asked Redis about yet: no Redis call at all for a settle
        below them or past them."""
        percents = self.settings.thresholds_percent
        found = crossings(tenant.name, tenant.policy.budgets,
                          {p: (periods.label(p), spend.of(p)) for p in PERIODS}, percents)
        key_budgets = key_budgets_of(tenant)
        if key_budgets.any:
            found += crossings(tenant.name, key_budgets, {p: (periods.label(p), key_spend.of(p)) for p in PERIODS},
                               percents, tenant.key_id)
        return [c for c in found if c.id not in self._asked]

    async def fire(self, found: list[Crossing]) -> None:
        """Create each alert unless another settle (here or on another replica) already has."""
        for crossing in found:
            created = await self.store.fire(crossing, time.time(), deliver=self.settings.webhook_url is not None)
            if len(self._asked) >= REMEMBERED:
                self._asked.clear()
            self._asked.add(crossing.id)
            if created:
                metrics.BUDGET_ALERTS.labels(crossing.tenant, crossing.label, str(crossing.percent)).inc()
                log.warning("budget alert %s: tenant %s%s reached %d%% of its %s budget (%s)", crossing.id,
                            crossing.tenant, f" key {crossing.key_id}" if crossing.key_id else "",
                            crossing.percent, crossing.budget, crossing.period)

    async def deliver_forever(self) -> None:
        import aiohttp  # here, not at the top: policies import without the web stack (tests/layers)

        async with aiohttp.ClientSession() as session:
            while True:
                await asyncio.sleep(POLL_S)
                try:
                    while await self.deliver_due(session):
                        pass
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # Redis away: the next round tries again
                    log.debug("alert delivery: %s: %s", type(exc).__name__, exc)

    async def deliver_due(self, session: Any) -> int:
        """Post the deliveries due now; how many were claimed."""
        settings = self.settings
        if settings.webhook_url is None or settings.secret is None:
            return 0
        claimed = await self.store.claim(int((settings.timeout_s + 5) * 1000))
        for alert in claimed:
            await self._deliver(session, alert, settings)
        return len(claimed)

    async def _deliver(self, session: Any, alert: dict, settings: AlertSettings) -> None:
        error = await webhook.post(session, settings.webhook_url, settings.secret, alert, settings.timeout_s)
        alert = {**alert, "attempts": alert["attempts"] + 1, "last_error": error}
        if error is None:
            metrics.ALERT_DELIVERIES.labels("delivered").inc()
            await self.store.record({**alert, "status": "delivered", "delivered_at": round(time.time(), 3)}, None)
        elif alert["attempts"] >= settings.max_attempts:
            metrics.ALERT_DELIVERIES.labels("failed").inc()
            await self.store.record({**alert, "status": "failed"}, None)
        else:
            metrics.ALERT_DELIVERIES.labels("retry").inc()
            backoff_s = min(2 ** (alert["attempts"] - 1), MAX_BACKOFF_S)
            await self.store.record({**alert, "status": "retrying"}, int((time.time() + backoff_s) * 1000))


def budget_alerts(redis: Any, prefix: str, settings: AlertSettings) -> BudgetAlerts:
    """The process-wide alerts for this Redis client and prefix; a reload brings new settings."""
    alerts = one_per_redis("alerts", redis, prefix, lambda: BudgetAlerts(AlertStore(redis, prefix), settings))
    alerts.settings = settings
    return alerts
