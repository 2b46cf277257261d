"""An admin's request body validated into the record Redis keeps (plain JSON data), and records
turned back into what authentication hands the request path.

A tenant record holds the same policy fields as a `tenants:` entry of the config (the same
parser reads it, so the API accepts exactly what the file does); a key record holds the hashes
of its secrets, never a secret."""
from __future__ import annotations

import dataclasses
import time
from typing import Any

from wire.errors import OpenAIError

from policies.budgets import Budgets, parse_budgets
from policies.config import (NAME_PATTERN, ApiKey, PoliciesConfig, RateLimits, Tenant, TenantPolicy, deep_merge,
                             parse_policy)
from typedconfig import ConfigError, Fields, parse_section

MAX_TEXT = 256           # description, owner, one metadata value
MAX_METADATA = 16        # metadata entries per key
MAX_MODELS = 64          # allowed_models entries per key
MAX_GRACE_S = 30 * 86400  # the longest an old secret may keep working after a rotation
DEFAULT_GRACE_S = 86400
KEY_FIELDS = ("description", "owner", "metadata", "expires_at", "rate_limits", "allowed_models", "budgets")


def _bad(message: str, param: str | None) -> OpenAIError:
    return OpenAIError(400, message, param=param, code="invalid_request")


def _config_error(exc: ConfigError) -> OpenAIError:
    """`<body>: field.path: why` -> 400 naming the field."""
    _, _, rest = str(exc).partition(": ")
    path, _, why = rest.partition(": ")
    return _bad(f"{path}: {why}" if why else rest, path or None)


def object_body(body: Any) -> dict:
    if not isinstance(body, dict):
        raise _bad("the body must be a JSON object", None)
    return body


def check_name(name: Any, param: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise _bad(f"'{param}' must match [A-Za-z0-9_.-]{{1,64}}", param)
    return name


def tenant_policy(config: PoliciesConfig, tier_names: list[str], raw: dict, path: str = "policy") -> TenantPolicy:
    """The tenant's policy: its own fields over `policy.defaults`, read by the config's own parser."""
    try:
        return parse_policy(Fields(deep_merge(config.defaults_raw, raw), path, "<body>"), tier_names,
                            config.embedding_tiers)
    except ConfigError as exc:
        raise _config_error(exc) from None


def new_tenant(config: PoliciesConfig, tier_names: list[str], body: dict) -> dict:
    body = object_body(body)
    unknown = sorted(set(body) - {"name", "policy"})
    if unknown:
        raise _bad(f"unknown field {unknown[0]!r}: a tenant has a name and a policy", unknown[0])
    name = check_name(body.get("name"), "name")
    policy = object_body(body.get("policy") or {})
    tenant_policy(config, tier_names, policy)
    now = int(time.time())
    return {"name": name, "policy": policy, "created_at": now, "updated_at": now}


def changed_tenant(config: PoliciesConfig, tier_names: list[str], record: dict, body: dict) -> dict:
    """PATCH: `policy` fields given replace the record's (null removes one: the default applies)."""
    body = object_body(body)
    unknown = sorted(set(body) - {"policy"})
    if unknown:
        raise _bad(f"unknown field {unknown[0]!r}: only 'policy' can change (a name is the tenant's id)",
                   unknown[0])
    policy = {**record["policy"], **object_body(body.get("policy") or {})}
    policy = {k: v for k, v in policy.items() if v is not None}
    tenant_policy(config, tier_names, policy)
    return {**record, "policy": policy, "updated_at": int(time.time())}


def _key_fields(body: dict, base: dict) -> dict:
    out = dict(base)
    for field in KEY_FIELDS:
        if field not in body:
            continue
        value = body[field]
        if value is None:
            out[field] = None
        elif field in ("description", "owner"):
            if not isinstance(value, str) or len(value) > MAX_TEXT:
                raise _bad(f"'{field}' must be a string of at most {MAX_TEXT} characters", field)
            out[field] = value
        elif field == "metadata":
            if not isinstance(value, dict) or len(value) > MAX_METADATA or not all(
                    isinstance(k, str) and isinstance(v, str) and 0 < len(k) <= 64 and len(v) <= MAX_TEXT
                    for k, v in value.items()):
                raise _bad(f"'metadata' must map at most {MAX_METADATA} names (1-64 characters) to strings of "
                           f"at most {MAX_TEXT} characters", field)
            out[field] = value
        elif field == "expires_at":
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise _bad("'expires_at' must be a Unix time in seconds", field)
            out[field] = value
        elif field == "rate_limits":
            try:
                limits = parse_section(RateLimits, Fields(value, "rate_limits", "<body>"))
            except ConfigError as exc:
                raise _config_error(exc) from None
            out[field] = {k: v for k, v in dataclasses.asdict(limits).items() if v is not None}
        elif field == "budgets":
            try:
                parse_budgets(value, "<body>")
            except ConfigError as exc:
                raise _config_error(exc) from None
            out[field] = value  # as written (USD), like a tenant's policy: read again by key_tenant
        elif field == "allowed_models":
            if not isinstance(value, list) or len(value) > MAX_MODELS or not all(
                    isinstance(m, str) and 0 < len(m) <= 256 for m in value):
                raise _bad(f"'allowed_models' must list at most {MAX_MODELS} model names", field)
            out[field] = sorted(set(value))
    if "expires_in_s" in body:
        seconds = body["expires_in_s"]
        if isinstance(seconds, bool) or not isinstance(seconds, int) or not 0 < seconds <= 10 * 365 * 86400:
            raise _bad("'expires_in_s' must be a whole number of seconds up to ten years", "expires_in_s")
        out["expires_at"] = int(time.time()) + seconds
    return out


def new_key(body: dict, key_id: str, digest: str, prefix: str) -> dict:
    body = object_body(body)
    unknown = sorted(set(body) - {"tenant", "expires_in_s", *KEY_FIELDS})
    if unknown:
        raise _bad(f"unknown field {unknown[0]!r}", unknown[0])
    tenant = check_name(body.get("tenant"), "tenant")
    now = int(time.time())
    base = {"id": key_id, "tenant": tenant, "prefix": prefix, "secrets": [{"sha256": digest, "until": None}],
            "created_at": now, "updated_at": now, "revoked_at": None, "expires_at": None,
            "description": None, "owner": None, "metadata": None, "rate_limits": None, "allowed_models": None,
            "budgets": None}
    return _key_fields(body, base)


def changed_key(record: dict, body: dict) -> dict:
    body = object_body(body)
    unknown = sorted(set(body) - {"expires_in_s", *KEY_FIELDS})
    if unknown:
        raise _bad(f"unknown field {unknown[0]!r} (a key's tenant never changes: create a new key)", unknown[0])
    return {**_key_fields(body, record), "updated_at": int(time.time())}


def rotated_key(record: dict, digest: str, prefix: str, grace_s: int, now: float) -> dict:
    """The new secret current; every older one still valid ends at now + grace (or sooner)."""
    until = int(now) + grace_s
    old = [{"sha256": s["sha256"], "until": until if s["until"] is None else min(s["until"], until)}
           for s in record["secrets"] if s["until"] is None or s["until"] > now]
    return {**record, "prefix": prefix, "secrets": [{"sha256": digest, "until": None}, *old],
            "updated_at": int(now)}


def grace_of(body: dict) -> int:
    grace = object_body(body).get("grace_s", DEFAULT_GRACE_S)
    if isinstance(grace, bool) or not isinstance(grace, int) or not 0 <= grace <= MAX_GRACE_S:
        raise _bad(f"'grace_s' must be a whole number of seconds from 0 to {MAX_GRACE_S}", "grace_s")
    unknown = sorted(set(body) - {"grace_s"})
    if unknown:
        raise _bad(f"unknown field {unknown[0]!r}", unknown[0])
    return grace


def public_key(record: dict) -> dict:
    """What listings show of a key: everything but its hashes."""
    shown = {k: v for k, v in record.items() if k != "secrets"}
    return {"object": "tiergate.key", **shown,
            "secrets": [{"until": s["until"]} for s in record["secrets"]]}


def key_tenant(tenant: Tenant, record: dict) -> Tenant:
    """The tenant as this key authenticates it: the key's own limits and allowed models applied."""
    policy = tenant.policy
    models = record.get("allowed_models")
    if models is not None:
        allowed = tuple(m for m in models if policy.allowed_models is None or m in policy.allowed_models)
        policy = dataclasses.replace(policy, allowed_models=allowed)
    limits = RateLimits(**(record.get("rate_limits") or {}))
    budgets = parse_budgets(record["budgets"], "<record>") if record.get("budgets") else Budgets()
    key = ApiKey(id=record["id"], sha256=record["secrets"][0]["sha256"], rate_limits=limits, budgets=budgets)
    return dataclasses.replace(tenant, policy=policy, keys=(key,), key_id=record["id"])
