"""What admission answers a tenant it refuses (budget or rate limit, whose, and Retry-After), and
the request tags its policy keeps."""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Sequence

from policies import metrics
from policies.config import Tenant
from policies.periods import next_reset
from policies.store import OVER_BUDGET, AdmitResult
from wire.errors import OpenAIError


def _seconds_until(now: datetime, what: str, week_start: int) -> int:
    period = what.removeprefix("key_")
    return max(1, math.ceil((next_reset(now, period, week_start) - now.astimezone(timezone.utc)).total_seconds()))


def refusal(tenant: Tenant, result: AdmitResult, now: datetime, week_start: int) -> OpenAIError:
    """The 429 for an admission the store refused: which budget or limit, whose, and when to retry."""
    if result.status == OVER_BUDGET:
        metrics.REJECTIONS.labels(tenant.name, "budget_exceeded").inc()
        whose = f"key {tenant.key_id!r} of tenant {tenant.name!r}" if result.what.startswith("key_") \
            else f"tenant {tenant.name!r}"
        if result.retry_after_ms:  # settled spend is under the budget; requests in flight hold the rest
            return OpenAIError(429, f"{result.what} hard budget of {whose} would be crossed: "
                                    "requests in flight hold the rest of it", code="budget_exceeded",
                               headers={"Retry-After": str(max(1, math.ceil(result.retry_after_ms / 1000)))})
        return OpenAIError(429, f"{result.what} hard budget of {whose} is spent or too small "
                                "for this request's worst case (prompt + n x max_tokens)",
                           code="budget_exceeded",
                           headers={"Retry-After": str(_seconds_until(now, result.what, week_start))})
    metrics.REJECTIONS.labels(tenant.name, "rate_limit_exceeded").inc()
    retry_s = max(1, math.ceil(result.retry_after_ms / 1000))
    return OpenAIError(429, f"rate limit reached ({result.what}) for tenant {tenant.name!r}; "
                            f"retry after {retry_s} s", code="rate_limit_exceeded",
                       headers={"Retry-After": str(retry_s)})


def allowed_tags(tenant: Tenant, tags: Sequence[str]) -> tuple[str, ...]:
    """The tags the tenant's policy names; the others are dropped and counted (bounded cardinality)."""
    allowed = tenant.policy.allowed_tags or ()
    kept = tuple(t for t in tags if t in allowed)
    if len(kept) < len(tags):
        metrics.TAGS_DROPPED.labels(tenant.name).inc(len(tags) - len(kept))
    return kept
