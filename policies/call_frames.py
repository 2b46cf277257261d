"""What admit.lua and settle.lua are sent that depends only on the tenant (its config, as the key
it authenticated with sees it) and the period: key names and limits, built and encoded to bytes
once and reused by the tenant's requests: redis-py encodes every word of every call, and each key
name is several f-strings."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policies.budgets import Budgets
from policies.config import ApiKey, RateLimits, Tenant
from policies.keyspace import DAY_TTL_S, MONTH_TTL_S, WEEK_TTL_S, KeySpace
from policies.periods import Periods

_NO_BUDGETS = Budgets()
_MAX_FRAMES = 4096  # tenants (as each key sees them) x periods kept; past it, start over


def word(value: Any) -> bytes:
    """A word as redis-py would encode it."""
    return value.encode() if isinstance(value, str) else repr(value).encode()


def own_key(tenant: Tenant) -> ApiKey | None:
    return next((k for k in tenant.keys if k.id == tenant.key_id), None) if tenant.key_id else None


def limits_of(tenant: Tenant) -> tuple[RateLimits, RateLimits]:
    key = own_key(tenant)
    return tenant.policy.rate_limits, key.rate_limits if key is not None else RateLimits()


def key_budgets_of(tenant: Tenant) -> Budgets:
    """The budgets of the key the tenant authenticated with (none set: an empty Budgets)."""
    key = own_key(tenant)
    return key.budgets if key is not None else _NO_BUDGETS


def _hard(budgets: Budgets, period: str) -> int:
    amount = budgets.amount(period, "hard")
    return -1 if amount is None else amount


@dataclass(frozen=True, slots=True)
class Frame:
    tenant: Tenant  # what it was built for, compared by identity
    periods: Periods
    holds: bool                       # a hard budget of the tenant or of its key: admission reserves
    admit_keys: tuple[bytes, ...]     # admit.lua KEYS 1-8
    admit_tail: tuple[bytes, ...]     # KEYS 10 on: the week, and the key's own budget keys
    admit_limits: tuple[bytes, ...]   # ARGV 3-8
    admit_args_tail: tuple[bytes, ...]  # ARGV 13 on
    settle_keys: tuple[bytes, ...]    # settle.lua KEYS 2 on
    settle_limits: tuple[bytes, ...]  # ARGV 7-10
    settle_tail: tuple[bytes, ...]    # ARGV 14-15


def build_frame(k: KeySpace, tenant: Tenant, periods: Periods) -> Frame:
    name, key_id = tenant.name, tenant.key_id or "-"
    own, per_key = limits_of(tenant)
    budgets, key_budgets = tenant.policy.budgets, key_budgets_of(tenant)
    day, week, month = k.spend(name, periods)
    admit_tail, admit_args_tail = [week], [_hard(budgets, "weekly")]
    if key_budgets.any:  # a key without budgets of its own costs the tenant's path nothing more
        admit_tail += [*k.spend(name, periods, key_id), k.reservations(name, key_id), k.reserved_amounts(name, key_id)]
        admit_args_tail += [_hard(key_budgets, "daily"), _hard(key_budgets, "weekly"), _hard(key_budgets, "monthly"), 1]
    settle_keys = [day, month, k.usage_day(name, periods.day), k.token_bucket(name), k.token_bucket(name, key_id),
                   k.reservations(name), k.reserved_amounts(name), k.usage_tags_day(name, periods.day), week]
    if tenant.key_id:  # a key's own spend is booked (and shown in /v1/usage) whether or not it has budgets
        settle_keys += k.spend(name, periods, key_id)
        if key_budgets.hard:  # admit held the key's own reservation only then
            settle_keys += [k.reservations(name, key_id), k.reserved_amounts(name, key_id)]
    return Frame(
        tenant, periods, bool(budgets.hard or key_budgets.hard),
        admit_keys=_words(k.requests_window(name), k.token_bucket(name), k.requests_window(name, key_id),
                          k.token_bucket(name, key_id), day, month, k.reservations(name), k.reserved_amounts(name)),
        admit_tail=_words(*admit_tail),
        admit_limits=_words(own.requests_per_minute or 0, own.tokens_per_minute or 0,
                            per_key.requests_per_minute or 0, per_key.tokens_per_minute or 0,
                            _hard(budgets, "daily"), _hard(budgets, "monthly")),
        admit_args_tail=_words(*admit_args_tail),
        settle_keys=_words(*settle_keys),
        settle_limits=_words(own.tokens_per_minute or 0, per_key.tokens_per_minute or 0, DAY_TTL_S, MONTH_TTL_S),
        settle_tail=_words(WEEK_TTL_S, 1 if tenant.key_id else 0))


def _words(*values: Any) -> tuple[bytes, ...]:
    return tuple(word(v) for v in values)


class Frames:
    """The frame of each tenant (as each of its keys sees it) for the current period."""

    def __init__(self, keys: KeySpace):
        self._keys = keys
        self._by_id: dict[int, Frame] = {}  # id(tenant): a frame holds its tenant, so the id stays its own

    def of(self, tenant: Tenant, periods: Periods) -> Frame:
        frame = self._by_id.get(id(tenant))
        if frame is None or frame.tenant is not tenant or frame.periods != periods:
            if len(self._by_id) >= _MAX_FRAMES:
                self._by_id.clear()
            frame = self._by_id[id(tenant)] = build_frame(self._keys, tenant, periods)
        return frame
