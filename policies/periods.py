"""Budget periods: the day, the week and the month a moment falls in, in the configured time zone,
and when each ends. Labels name Redis keys and usage-log fields: a day `2026-12-01`, a week by
the local date it began `2026-11-30`, a month `2026-12`."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

PERIODS = ("daily", "weekly", "monthly")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


@dataclass(frozen=True)
class Periods:
    day: str
    week: str
    month: str

    def label(self, period: str) -> str:
        return {"daily": self.day, "weekly": self.week, "monthly": self.month}[period]


def _week_begins(now: datetime, week_start: int) -> datetime:
    """Local midnight of the day the week holding `now` began (`week_start`: 0 Monday .. 6 Sunday)."""
    start = now - timedelta(days=(now.weekday() - week_start) % 7)
    return start.replace(hour=0, minute=0, second=0, microsecond=0)


def periods_at(now: datetime, week_start: int = 0) -> Periods:
    return _periods_of(now.date(), week_start)


@functools.lru_cache(maxsize=64)
def _periods_of(day: date, week_start: int) -> Periods:
    """The labels of a local day: asked several times a request, they change once a day."""
    begins = day - timedelta(days=(day.weekday() - week_start) % 7)
    return Periods(day.isoformat(), begins.isoformat(), day.strftime("%Y-%m"))


def week_of_day(day: str, week_start: int = 0) -> str:
    """The week label of a day label (usage records written before weeks were kept)."""
    return periods_at(datetime.strptime(day, "%Y-%m-%d"), week_start).week


def next_reset(now: datetime, what: str, week_start: int = 0) -> datetime:
    """When the `daily`, `weekly` or `monthly` period after `now` begins: midnight in `now`'s time zone
    (policy.timezone), as a UTC instant."""
    if what == "monthly":
        local = (now.replace(day=1) + timedelta(days=32)).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    elif what == "weekly":
        local = _week_begins(now, week_start) + timedelta(days=7)
    else:
        local = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return local.astimezone(timezone.utc)  # across a DST change, wall-clock differences would be an hour off
