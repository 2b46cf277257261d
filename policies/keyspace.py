"""Redis key names. Every key of one tenant carries the hash tag `{tenant}`, so one Lua script's
keys live in one slot (Redis Cluster safe) and a tenant's keys never overlap another's."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from policies.periods import PERIODS, Periods

DAY_TTL_S = 400 * 86400     # per-day spend and usage stay queryable for a bit over a year
WEEK_TTL_S = 400 * 86400
MONTH_TTL_S = 800 * 86400


def utc_day(now: datetime | None = None) -> str:
    return (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d")


@dataclass(frozen=True)
class KeySpace:
    prefix: str

    def _base(self, tenant: str) -> str:
        return f"{self.prefix}policy:{{{tenant}}}"

    def requests_window(self, tenant: str, key_id: str | None = None) -> str:
        return f"{self._base(tenant)}:{'key:' + key_id + ':' if key_id else ''}rpm"

    def token_bucket(self, tenant: str, key_id: str | None = None) -> str:
        return f"{self._base(tenant)}:{'key:' + key_id + ':' if key_id else ''}tpm"

    def spend_day(self, tenant: str, day: str) -> str:
        return self.spend_of(tenant, "daily", day)

    def spend_week(self, tenant: str, week: str) -> str:
        return self.spend_of(tenant, "weekly", week)

    def spend_month(self, tenant: str, month: str) -> str:
        return self.spend_of(tenant, "monthly", month)

    def spend_of(self, tenant: str, period: str, label: str, key_id: str | None = None) -> str:
        """Settled spend of one period (`daily`, `weekly`, `monthly`) of the tenant, or of one key's own."""
        return f"{self._base(tenant)}:{'key:' + key_id + ':' if key_id else ''}spend:{period[0]}:{label}"

    def spend(self, tenant: str, periods: Periods, key_id: str | None = None) -> list[str]:
        """The tenant's (or with `key_id`, that key's own) spend of the day, week and month."""
        return [self.spend_of(tenant, p, periods.label(p), key_id) for p in PERIODS]

    def usage_day(self, tenant: str, day: str) -> str:
        return f"{self._base(tenant)}:usage:{day}"

    def usage_tags_day(self, tenant: str, day: str) -> str:
        """Hash: requests, tokens and cost of the day by tag (`<tag>:<metric>`)."""
        return f"{self._base(tenant)}:usage:tags:{day}"

    def reservations(self, tenant: str, key_id: str | None = None) -> str:
        """Sorted set: live reservation ids of admitted requests (of the tenant, or of one key with
        budgets of its own), scored by their expiry (ms)."""
        return f"{self._base(tenant)}:{'key:' + key_id + ':' if key_id else ''}reserved:expiry"

    def reserved_amounts(self, tenant: str, key_id: str | None = None) -> str:
        """Hash: each live reservation's worst-case cost (micro-USD), and their sum under '#total'."""
        return f"{self._base(tenant)}:{'key:' + key_id + ':' if key_id else ''}reserved:amount"

    def admitted(self, tenant: str, member: str) -> str:
        """Marks one admission for as long as its call may be resent: run again, it is not charged twice."""
        return f"{self._base(tenant)}:admitted:{member}"

    def settled(self, tenant: str, request_id: str) -> str:
        return f"{self._base(tenant)}:settled:{request_id}"

    def tenant_pattern(self, tenant: str) -> str:
        """Glob matching every key of one tenant (escaped braces for SCAN MATCH)."""
        return f"{self.prefix}policy:\\{{{tenant}\\}}:*"
