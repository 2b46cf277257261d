"""The `policy:` (global defaults and service settings) and `tenants:` sections of the config YAML."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from policies.costs import usd_to_micro
from policies.fields import Fields, PolicyConfigError, deep_merge

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # tenant/key names end up in Redis keys and metric labels
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
PRIORITIES = ("interactive", "batch")
SOFT_BUDGET_ACTIONS = ("downgrade", "none")


@dataclass(frozen=True)
class RateLimits:
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


@dataclass(frozen=True)
class Budgets:
    """All amounts in integer micro-dollars; None = no such budget."""
    daily_soft: int | None = None
    daily_hard: int | None = None
    monthly_soft: int | None = None
    monthly_hard: int | None = None


@dataclass(frozen=True)
class TenantPolicy:
    allowed_tiers: tuple[str, ...] | None = None    # None = every tier
    allowed_models: tuple[str, ...] | None = None   # None = every model
    min_tier: str | None = None
    max_tier: str | None = None
    tier_bias: int = 0                 # +1 = one tier above the classifier's choice
    quality_preference: float = 0.0    # -1 cheapest .. +1 best; moves the classifier threshold
    max_tokens: int | None = None
    priority: str = "interactive"
    sampling_rate: float | None = None  # None = the gateway's global quality-sampling rate
    pinned_routes: dict[str, str] = field(default_factory=dict)
    rate_limits: RateLimits = RateLimits()
    budgets: Budgets = Budgets()
    soft_budget_action: str = "downgrade"


@dataclass(frozen=True)
class ApiKey:
    id: str
    sha256: str
    rate_limits: RateLimits = RateLimits()


@dataclass(frozen=True)
class Tenant:
    name: str
    policy: TenantPolicy
    keys: tuple[ApiKey, ...] = ()
    is_admin: bool = False
    key_id: str | None = None  # the key this request authenticated with (set by authenticate)


@dataclass(frozen=True)
class UsageLogSettings:
    dir: str = "usage-logs"
    max_bytes: int = 64 * 1024 * 1024
    fsync: str = "interval"          # always | interval | never
    fsync_interval_s: float = 1.0


@dataclass(frozen=True)
class PoliciesConfig:
    tenants: dict[str, Tenant]
    defaults: TenantPolicy
    admin_key_sha256: str | None = None
    anonymous_tenant: str | None = None
    on_redis_error: str = "open"     # open: serve without limits; closed: 503
    redis_timeout_s: float = 0.5
    key_prefix: str | None = None   # None: the gateway's redis.key_prefix
    idempotency_ttl_s: int = 7 * 86400
    usage_log: UsageLogSettings = UsageLogSettings()
    source: str = "<config>"


def _rate_limits(f: Fields) -> RateLimits:
    limits = RateLimits(f.integer("requests_per_minute", None, minimum=1),
                        f.integer("tokens_per_minute", None, minimum=1))
    f.finish()
    return limits


def _budget_pair(f: Fields) -> tuple[int | None, int | None]:
    soft, hard = f.number("soft", None, minimum=0), f.number("hard", None, minimum=0)
    f.finish()
    try:
        pair = (None if soft is None else usd_to_micro(soft), None if hard is None else usd_to_micro(hard))
    except ValueError as exc:
        raise f.error(f.path, str(exc)) from None
    if pair[0] is not None and pair[1] is not None and pair[0] > pair[1]:
        raise f.error(f.field("soft"), "must not exceed hard")
    return pair


def _budgets(f: Fields) -> Budgets:
    day, month = _budget_pair(f.child("daily_usd")), _budget_pair(f.child("monthly_usd"))
    f.finish()
    return Budgets(day[0], day[1], month[0], month[1])


def _tier_name(f: Fields, name: str, tiers: list[str]) -> str | None:
    value = f.string(name, None)
    if value is not None and value not in tiers:
        raise f.error(f.field(name), f"unknown tier {value!r} (tiers: {', '.join(tiers)})")
    return value


def _policy(f: Fields, tiers: list[str]) -> TenantPolicy:
    allowed = f.string_list("allowed_tiers", None)
    for tier in allowed or ():
        if tier not in tiers:
            raise f.error(f.field("allowed_tiers"), f"unknown tier {tier!r} (tiers: {', '.join(tiers)})")
    pins = f.child("pinned_routes")
    pinned = {alias: _tier_name(pins, alias, tiers) for alias in list(pins.raw)}
    pins.finish()
    policy = TenantPolicy(
        allowed_tiers=allowed, allowed_models=f.string_list("allowed_models", None),
        min_tier=_tier_name(f, "min_tier", tiers), max_tier=_tier_name(f, "max_tier", tiers),
        tier_bias=f.integer("tier_bias", 0, minimum=-len(tiers), maximum=len(tiers)),
        quality_preference=float(f.number("quality_preference", 0.0, minimum=-1.0, maximum=1.0)),
        max_tokens=f.integer("max_tokens", None, minimum=1),
        priority=f.string("priority", "interactive", PRIORITIES),
        sampling_rate=f.number("sampling_rate", None, minimum=0.0, maximum=1.0),
        pinned_routes=pinned, rate_limits=_rate_limits(f.child("rate_limits")),
        budgets=_budgets(f.child("budgets")),
        soft_budget_action=f.string("soft_budget_action", "downgrade", SOFT_BUDGET_ACTIONS),
    )
    f.finish()
    if policy.min_tier and policy.max_tier and tiers.index(policy.min_tier) > tiers.index(policy.max_tier):
        raise f.error(f.field("min_tier"), f"{policy.min_tier!r} is above max_tier {policy.max_tier!r}")
    return policy


def _sha256(f: Fields, name: str, default=None) -> str | None:
    value = f.string(name, default)
    if value is not None and not _SHA256_HEX.match(value):
        raise f.error(f.field(name), "must be 64 lowercase hex digits (python -m policies hash-key KEY)")
    return value


def _keys(f_tenant: Fields, seen: dict[str, str]) -> tuple[ApiKey, ...]:
    raw = f_tenant.get("keys", [])
    if not isinstance(raw, list):
        raise f_tenant.error(f_tenant.field("keys"), "must be a list of {id, sha256}")
    keys = []
    for i, entry in enumerate(raw):
        k = Fields(entry, f"{f_tenant.field('keys')}[{i}]", f_tenant.source)
        key = ApiKey(k.string("id"), _sha256(k, "sha256"), _rate_limits(k.child("rate_limits")))
        k.finish()
        if not _NAME.match(key.id):
            raise k.error(k.field("id"), "must match [A-Za-z0-9_.-]{1,64}")
        if key.sha256 in seen:
            raise k.error(k.field("sha256"), f"same key hash already used by {seen[key.sha256]}")
        seen[key.sha256] = k.path
        keys.append(key)
    return tuple(keys)


def parse_policies(policy_raw: dict | None, tenants_raw: dict | None, tier_names: list[str],
                   source: str = "<config>") -> PoliciesConfig:
    """Validate the two sections against the gateway's tier names (ascending level order)."""
    p = Fields(policy_raw, "policy", source)
    defaults_raw = p.get("defaults", {})
    defaults = _policy(Fields(defaults_raw, "policy.defaults", source), tier_names)
    log = p.child("usage_log")
    usage_log = UsageLogSettings(
        dir=log.string("dir", "usage-logs"), max_bytes=log.integer("max_bytes", 64 * 1024 * 1024, minimum=4096),
        fsync=log.string("fsync", "interval", ("always", "interval", "never")),
        fsync_interval_s=float(log.number("fsync_interval_s", 1.0, minimum=0.0)))
    log.finish()
    t = Fields(tenants_raw, "tenants", source)
    tenants: dict[str, Tenant] = {}
    seen_hashes: dict[str, str] = {}
    for name in list(t.raw):
        if not isinstance(name, str) or not _NAME.match(name):
            raise t.error(t.field(str(name)), "tenant names must match [A-Za-z0-9_.-]{1,64}")
        entry = t.child(name)
        keys = _keys(entry, seen_hashes)
        overrides = {k: v for k, v in entry.raw.items() if k != "keys"}
        if not isinstance(defaults_raw, dict):
            raise p.error("policy.defaults", "must be a mapping")
        merged = Fields(deep_merge(defaults_raw, overrides), entry.path, source)
        tenants[name] = Tenant(name, _policy(merged, tier_names), keys)
    t.finish()
    admin = _sha256(p, "admin_key_sha256", None)
    if admin is not None and admin in seen_hashes:
        raise p.error("policy.admin_key_sha256", f"same hash as {seen_hashes[admin]}")
    anonymous = p.string("anonymous_tenant", None)
    if anonymous is not None and anonymous not in tenants:
        raise p.error("policy.anonymous_tenant", f"names no tenant in tenants: {anonymous!r}")
    config = PoliciesConfig(
        tenants=tenants, defaults=defaults, admin_key_sha256=admin, anonymous_tenant=anonymous,
        on_redis_error=p.string("on_redis_error", "open", ("open", "closed")),
        redis_timeout_s=float(p.number("redis_timeout_s", 0.5, minimum=0.001)),
        key_prefix=p.string("key_prefix", None),
        idempotency_ttl_s=p.integer("idempotency_ttl_s", 7 * 86400, minimum=60),
        usage_log=usage_log, source=source)
    p.finish()
    return config


def _tier_names_of(raw: dict, source: str) -> list[str]:
    tiers = raw.get("tiers")
    if not isinstance(tiers, list) or not tiers:
        raise PolicyConfigError(f"{source}: tiers: required (a non-empty list) to validate tenant policies")
    ordered = sorted(tiers, key=lambda t: t.get("level", 0) if isinstance(t, dict) else 0)
    return [str(t.get("name")) for t in ordered if isinstance(t, dict)]


def load_policies_file(path: str) -> PoliciesConfig:
    """Read the policy sections (and tier names) from a gateway config YAML file."""
    try:
        with open(path, encoding="utf-8") as fh:
            raw = yaml.safe_load(fh) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise PolicyConfigError(f"{path}: cannot read: {exc}") from None
    if not isinstance(raw, dict):
        raise PolicyConfigError(f"{path}: top level must be a mapping")
    return parse_policies(raw.get("policy"), raw.get("tenants"), _tier_names_of(raw, path), path)
