"""The `policy:` (defaults and service settings) and `tenants:` sections of the config YAML.

The gateway's loader calls `parse_policies` with the two raw sections and its tier names; this
package never sees the gateway's config. Defaults are the dataclass defaults below.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Sequence
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from policies.budgets import BUDGETS_DOC, Budgets, read_budgets
from policies.cache_policy import CachePolicy
from policies.periods import WEEKDAYS
from policies.routing_policy import RoutingPolicy
from typedconfig import MISSING, Fields, parse_section, setting
from typedconfig.sections import reject_moved

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # tenant/key names end up in Redis keys and metric labels
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
PRIORITIES = ("interactive", "batch")
SOFT_BUDGET_ACTIONS = ("downgrade", "none")
# Knobs that were per-policy duplicates of the gateway's Redis settings: one knob each now.
MOVED = {"key_prefix": "redis.key_prefix", "redis_timeout_s": "redis.socket_timeout_s"}


@dataclass(frozen=True)
class RateLimits:
    requests_per_minute: int | None = setting(None, "Requests per minute; unset: no limit.", minimum=1)
    tokens_per_minute: int | None = setting(None, "Prompt plus completion tokens per minute; unset: no limit.",
                                            minimum=1)
    max_concurrent_requests: int | None = setting(None, "Requests open at once (a stream counts until it ends), "
                                                        "across replicas, on every /v1 endpoint; past it a 429 "
                                                        "naming this field. Unset: no limit.", minimum=1)


@dataclass(frozen=True)
class StorageQuotas:
    files: int = setting(1000, "Files a tenant may keep at once (uploads and batch results); past it, an "
                               "upload is a 429.", minimum=1)
    files_bytes: int = setting(1 << 30, "Bytes of files a tenant may keep (on disk, in batches.files_dir); "
                                        "an upload past it is a 413.", minimum=1024)
    stored_responses: int = setting(10_000, "Responses (/v1/responses with store: true) a tenant may keep "
                                            "at once; past it, a request that stores is a 429.", minimum=1)
    stored_responses_bytes: int = setting(64 << 20, "Bytes of stored conversations a tenant may keep (in "
                                                    "Redis); past it, a request that stores is a 413.",
                                          minimum=1024)
    cache_bytes: int = setting(64 << 20, "Bytes of cached answers a tenant may keep (in Redis); past it the least "
                                         "recently used entries are evicted. A quota of its own: a full cache "
                                         "never refuses a file or a stored response.", minimum=1024)





_TAG = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
MAX_ALLOWED_TAGS = 64


def _tag_names(f: Fields, key: str) -> tuple[str, ...] | None:
    names = f.string_list(key, None)
    if names is not None and (len(names) > MAX_ALLOWED_TAGS or not all(_TAG.match(n) for n in names)):
        f.fail(key, f"must list at most {MAX_ALLOWED_TAGS} tags, each [A-Za-z0-9_.:-]{{1,64}}")
    return None if names is None else tuple(dict.fromkeys(names))



@dataclass(frozen=True)
class TenantPolicy:
    allowed_tiers: tuple[str, ...] | None = setting(None, "Tiers this tenant may use, chat and embeddings tiers "
                                                          "alike; unset: every tier. An explicit request for "
                                                          "another gets 403.")
    allowed_models: tuple[str, ...] | None = setting(None, "Model names this tenant may request; unset: all.")
    min_tier: str | None = setting(None, "Choices below this tier are raised to it.")
    max_tier: str | None = setting(None, "Choices above this tier are lowered to it.")
    tier_bias: int = setting(0, "+1: one tier above the classifier's choice (not applied to explicit "
                                "requests); at most the number of tiers either way.")
    quality_preference: float = setting(0.0, "-1 cheapest .. +1 best; moves the classifier threshold.",
                                        minimum=-1.0, maximum=1.0)
    quality_target: float | None = setting(None, "At least this share of the top tier's quality (0.5..1): the "
                                                 "threshold calibrated for it on stored verdicts (learned "
                                                 "outcomes) routes; unset: the calibrated 0.95, or the "
                                                 "classifier's thresholds before outcomes are learned.",
                                           minimum=0.5, maximum=1.0)
    max_tokens: int | None = setting(None, "Cap on the request's max_tokens.", minimum=1)
    priority: str = setting("interactive", "Sent to workers as x-tiergate-priority: batch requests are scheduled "
                                           "after interactive ones and preempted first.", choices=PRIORITIES)
    structured_escalation: bool = setting(True, "A non-streamed structured answer (response_format) cut by "
                                                "max_tokens or failing its schema is asked once more of the "
                                                "next tier up that the tenant may use and that can serve it; "
                                                "both attempts are billed.")
    sampling_rate: float | None = setting(None, "Quality-sampling rate for this tenant; unset: the gateway's "
                                                "quality.sampling_rate.", minimum=0.0, maximum=1.0)
    pinned_routes: dict[str, str] = setting(doc="alias -> tier: the alias always maps to that tier (no bias, "
                                                "clamp or budget downgrade).", factory=dict)
    rate_limits: RateLimits = setting(RateLimits(), "Limits per tenant (a key may add its own).")
    budgets: Budgets = setting(Budgets(), BUDGETS_DOC + " A spent hard budget refuses with 429, a soft one "
                                                        "downgrades.", parse=read_budgets, shown_as="mapping")
    soft_budget_action: str = setting("downgrade", "Past a soft budget: downgrade (one allowed tier cheaper) "
                                                   "or none.", choices=SOFT_BUDGET_ACTIONS)
    allowed_tags: tuple[str, ...] | None = setting(None, "Tags this tenant's requests may carry for spend by tag "
                                                         "(metadata.tags or x-tiergate-tags; at most 64 names, "
                                                         "[A-Za-z0-9_.:-]{1,64}); other tags are dropped and "
                                                         "counted. Unset: none kept.", parse=lambda f, k: _tag_names(f, k))
    storage: StorageQuotas = setting(StorageQuotas(), "What the tenant may keep stored: files and stored "
                                                      "responses, by count and bytes, and cached answers.")
    cache: CachePolicy = setting(CachePolicy(), "The exact response cache for this tenant (docs/caching.md).")
    routing: RoutingPolicy = setting(RoutingPolicy(), "Routing after the decision: the cascade.")


def _sha256(f: Fields, key: str, default: str | None = None) -> str | None:
    value = f.string(key, default)
    if value is not None and not _SHA256_HEX.match(value):
        f.fail(key, "must be 64 lowercase hex digits (python -m policies hash-key KEY)")
    return value


@dataclass(frozen=True)
class ApiKey:
    id: str = setting(doc="The key's name (usage logs, metrics): [A-Za-z0-9_.-]{1,64}.")
    sha256: str = setting(doc="SHA-256 hex of the key (`python -m policies hash-key KEY`); the key itself "
                              "is never stored.", parse=lambda f, key: _sha256(f, key, MISSING))
    rate_limits: RateLimits = setting(RateLimits(), "Limits of this key alone, on top of the tenant's.")
    budgets: Budgets = setting(Budgets(), "This key's own budgets, on top of the tenant's (both must have room): "
                                          + BUDGETS_DOC, parse=read_budgets, shown_as="mapping")


ADMIN_SCOPES = ("read", "write")


@dataclass(frozen=True)
class AdminKey:
    id: str = setting(doc="The admin key's name, written as `who` in the audit log: [A-Za-z0-9_.-]{1,64}.")
    sha256: str = setting(doc="SHA-256 hex of the admin key (`python -m policies hash-key KEY`).",
                          parse=lambda f, key: _sha256(f, key, MISSING))
    scope: str = setting("read", "read: every admin GET (tenants, keys, audit, all usage); write: also "
                                 "creates, changes, rotates and revokes.", choices=ADMIN_SCOPES)


@dataclass(frozen=True)
class Tenant:
    name: str
    policy: TenantPolicy
    keys: tuple[ApiKey, ...] = ()
    is_admin: bool = False
    key_id: str | None = None  # the key this request authenticated with (set by authenticate)
    admin_scope: str | None = None  # an admin key's scope (read or write); None for a tenant's key


@dataclass(frozen=True)
class UsageLogSettings:
    dir: str = setting("usage-logs", "Folder of the JSONL usage logs (one file per process).")
    max_bytes: int = setting(64 * 1024 * 1024, "Size at which a log file is rotated.", minimum=4096)
    fsync: str = setting("interval", "When records reach the disk: always, interval or never.",
                         choices=("always", "interval", "never"))
    fsync_interval_s: float = setting(1.0, "Period of fsync for fsync: interval.", minimum=0.0)


def _percentages(f: Fields, key: str) -> tuple[int, ...]:
    values = f.get(key, [50, 80, 100])
    if not isinstance(values, list) or len(values) > 10 or not all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1000 for v in values):
        f.fail(key, "must list at most 10 whole percentages from 1 to 1000")
    return tuple(sorted(set(values)))


def _zone(f: Fields, key: str) -> str:
    name = f.string(key, "UTC")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        f.fail(key, f"must be an IANA time zone name such as UTC or Europe/Paris, got {name!r}")
    return name


def _webhook_url(f: Fields, key: str) -> str | None:
    url = f.string(key, None)
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
            f.fail(key, f"must be an http(s) URL without credentials, got {url!r}")
    return url


def _secret_env(f: Fields, key: str) -> str | None:
    env = f.string(key, None)
    if env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", env):
        f.fail(key, "must be an environment variable name (letters, digits, _)")
    return env


@dataclass(frozen=True)
class AlertSettings:
    thresholds_percent: tuple[int, ...] = setting((50, 80, 100), "Shares of each budget (its hard amount, or its "
                                                                 "soft one when it has no hard) whose crossing "
                                                                 "alerts once per period.",
                                                  parse=_percentages, shown_as="list of int")
    webhook_url: str | None = setting(None, "Where each alert is POSTed (JSON, HMAC-signed); unset: alerts are "
                                            "counted in tiergate_budget_alerts_total and listed at /admin/alerts "
                                            "only.", parse=_webhook_url)
    secret_env: str | None = setting(None, "Environment variable holding the HMAC-SHA256 key that signs each "
                                           "webhook body (X-Tiergate-Signature); required with webhook_url.",
                                     parse=_secret_env)
    timeout_s: float = setting(5.0, "Longest wait for the receiver's answer to one delivery.", above=0,
                               maximum=60.0)
    max_attempts: int = setting(8, "Deliveries tried per alert (backoff 1 s, 2 s, 4 s ... up to 5 min) before "
                                   "it is marked failed.", minimum=1, maximum=50)
    secret: str | None = setting(None, internal=True, repr=False)  # read from secret_env at load


def _alerts(f: Fields, key: str) -> AlertSettings:
    section = f.child(key)
    settings = parse_section(AlertSettings, section)
    if settings.webhook_url and not settings.secret_env:
        section.fail("secret_env", "is required with webhook_url: every delivery is signed")
    if settings.secret_env:
        secret = os.environ.get(settings.secret_env, "")
        if not secret:
            section.fail("secret_env", f"environment variable {settings.secret_env} is not set or empty")
        settings = replace(settings, secret=secret)
    return settings


@dataclass(frozen=True)
class PoliciesConfig:
    tenants: dict[str, Tenant] = setting(factory=dict, internal=True)  # from the top-level `tenants:`
    defaults: TenantPolicy = setting(TenantPolicy(), "Policy fields every tenant inherits, field by field "
                                                     "(nested mappings merge).")
    admin_key_sha256: str | None = setting(None, "SHA-256 hex of the admin key, which reads every tenant's "
                                                 "/v1/usage.", parse=_sha256)
    admin_keys: tuple[AdminKey, ...] = setting((), "More admin keys, each with a scope (read or write) and an "
                                                   "id the audit log names; admin_key_sha256 is one with scope "
                                                   "write and id `admin`.", items=AdminKey,
                                               parse=lambda f, key: _admin_keys(f, key))
    timezone: str = setting("UTC", "IANA time zone in which budget and usage days and months begin (e.g. "
                                   "Europe/Paris: at local midnight). Changing it starts new periods at once "
                                   "(their spend counts from 0).", parse=_zone)
    week_start: str = setting("monday", "The day weekly budgets begin, at midnight in timezone. Changing it "
                                        "starts a new week at once (its spend counts from 0).", choices=WEEKDAYS)
    key_sync_interval_s: float = setting(1.0, "How often each replica compares its copy of the API-managed "
                                              "tenants and keys with Redis's version, besides the pub/sub "
                                              "notice of each change (the upper bound of propagation while "
                                              "that subscription is down).", minimum=0.05, maximum=60.0)
    anonymous_tenant: str | None = setting(None, "The tenant of requests without Authorization; unset: they "
                                                 "get 401.")
    on_redis_error: str = setting("open", "When Redis is unavailable: open (serve under this replica's own "
                                          "approximate limits, counted) or closed (answer 503).", choices=("open", "closed"))
    idempotency_ttl_s: int = setting(7 * 86400, "How long a settled request id (the gateway's own, never a "
                                                 "client's) is remembered in Redis.",
                                     minimum=60)
    usage_log: UsageLogSettings = setting(UsageLogSettings(), "The append-only usage log, the ledger's source "
                                                              "of truth for rebuild-ledger.")
    alerts: AlertSettings = setting(AlertSettings(), "Budget alerts: each threshold of each tenant and key budget "
                                                     "alerts once per period, across replicas.", parse=_alerts)
    source: str = setting("<config>", internal=True)
    defaults_raw: dict = setting(factory=dict, internal=True)  # `defaults` as written: API tenants merge over it
    embedding_tiers: tuple[str, ...] = setting((), internal=True)  # names allowed_tiers may list besides the chat tiers

    @property
    def week_start_index(self) -> int:
        return WEEKDAYS.index(self.week_start)

    @property
    def keyed(self) -> bool:
        """Keys are checked: tenants in the file, or an admin key that manages them through /admin/."""
        return bool(self.tenants or self.admin_key_sha256 or self.admin_keys)


def _admin_keys(f: Fields, key: str) -> tuple[AdminKey, ...]:
    keys = []
    for path, entry in f.items(key, []):
        admin = parse_section(AdminKey, Fields(entry, path, f.source))
        if not NAME_PATTERN.match(admin.id):
            f.fail(key, f"{path}.id must match [A-Za-z0-9_.-]{{1,64}}")
        keys.append(admin)
    return tuple(keys)


def _tier_name(f: Fields, key: str, tiers: list[str]) -> str | None:
    value = f.string(key, None)
    if value is not None and value not in tiers:
        f.fail(key, f"unknown tier {value!r} (tiers: {', '.join(tiers)})")
    return value


def _allowed_tiers(f: Fields, key: str, tiers: list[str]) -> tuple[str, ...] | None:
    allowed = f.string_list(key, None)
    for tier in allowed or ():
        if tier not in tiers:
            f.fail(key, f"unknown tier {tier!r} (tiers: {', '.join(tiers)})")
    return allowed


def _pinned_routes(f: Fields, key: str, tiers: list[str]) -> dict[str, str]:
    pins = f.child(key)
    pinned = {alias: _tier_name(pins, alias, tiers) for alias in list(pins.raw)}
    pins.finish()
    return pinned


def parse_policy(f: Fields, tiers: list[str], embedding_tiers: Sequence[str] = ()) -> TenantPolicy:
    """`tiers`: the chat tiers by ascending level; allowed_tiers may name `embedding_tiers` too."""
    policy = parse_section(
        TenantPolicy, f, allowed_tiers=lambda f, k: _allowed_tiers(f, k, [*tiers, *embedding_tiers]),
        min_tier=lambda f, k: _tier_name(f, k, tiers), max_tier=lambda f, k: _tier_name(f, k, tiers),
        pinned_routes=lambda f, k: _pinned_routes(f, k, tiers))
    if abs(policy.tier_bias) > len(tiers):
        f.fail("tier_bias", f"must be between {-len(tiers)} and {len(tiers)}, got {policy.tier_bias}")
    if policy.cache.ttl_s > policy.cache.max_ttl_s:
        f.fail("cache.ttl_s", f"{policy.cache.ttl_s} is above cache.max_ttl_s ({policy.cache.max_ttl_s})")
    if policy.min_tier and policy.max_tier and tiers.index(policy.min_tier) > tiers.index(policy.max_tier):
        f.fail("min_tier", f"{policy.min_tier!r} is above max_tier {policy.max_tier!r}")
    return policy


def _keys(tenant: Fields, seen: dict[str, str]) -> tuple[ApiKey, ...]:
    keys = []
    for path, entry in tenant.items("keys", []):
        k = Fields(entry, path, tenant.source)
        key = parse_section(ApiKey, k)
        if not NAME_PATTERN.match(key.id):
            k.fail("id", "must match [A-Za-z0-9_.-]{1,64}")
        if key.sha256 in seen:
            k.fail("sha256", f"same key hash already used by {seen[key.sha256]}")
        seen[key.sha256] = path
        keys.append(key)
    return tuple(keys)


def _tenants(t: Fields, defaults_raw: dict, tier_names: list[str], seen_hashes: dict[str, str],
             embedding_tiers: Sequence[str]) -> dict:
    tenants: dict[str, Tenant] = {}
    for name in list(t.raw):
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            t.fail(str(name), "tenant names must match [A-Za-z0-9_.-]{1,64}")
        entry = t.child(name)
        keys = _keys(entry, seen_hashes)
        overrides = {k: v for k, v in entry.raw.items() if k != "keys"}
        merged = Fields(deep_merge(defaults_raw, overrides), entry.path, t.source)
        tenants[name] = Tenant(name, parse_policy(merged, tier_names, embedding_tiers), keys)
    t.finish()
    return tenants


def parse_policies(policy_raw: dict | None, tenants_raw: dict | None, tier_names: list[str],
                   source: str = "<config>", embedding_tiers: Sequence[str] = ()) -> PoliciesConfig:
    """Validate the two sections against the gateway's tier names (ascending level order)."""
    p = Fields(policy_raw, "policy", source)
    reject_moved(p, MOVED, "no longer a policy setting; set {where}, one setting for every Redis user")
    defaults_f = p.child("defaults")
    defaults = parse_policy(defaults_f, tier_names, embedding_tiers)
    seen_hashes: dict[str, str] = {}
    tenants = _tenants(Fields(tenants_raw, "tenants", source), defaults_f.raw, tier_names, seen_hashes,
                       embedding_tiers)
    config = parse_section(PoliciesConfig, p, defaults=lambda f, k: defaults)
    if config.admin_key_sha256 is not None and config.admin_key_sha256 in seen_hashes:
        p.fail("admin_key_sha256", f"same hash as {seen_hashes[config.admin_key_sha256]}")
    for i, admin in enumerate(config.admin_keys):
        if admin.sha256 in seen_hashes or admin.sha256 == config.admin_key_sha256:
            p.fail(f"admin_keys[{i}].sha256", "same hash as another key")
        seen_hashes[admin.sha256] = f"policy.admin_keys[{i}]"
    if config.anonymous_tenant is not None and config.anonymous_tenant not in tenants:
        p.fail("anonymous_tenant", f"names no tenant in tenants: {config.anonymous_tenant!r}")
    return replace(config, tenants=tenants, source=source, defaults_raw=dict(defaults_f.raw),
                   embedding_tiers=tuple(embedding_tiers))


def deep_merge(base: dict, override: dict) -> dict:
    """`override` wins field by field; nested mappings merge, lists and scalars replace."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
