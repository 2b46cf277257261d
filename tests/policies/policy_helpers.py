"""Shared helpers for the policies tests: tiers like the gateway's, configs, key cleanup."""
from __future__ import annotations

from dataclasses import dataclass

from policies.config import parse_policies
from policies.keys import hash_key

TIER_NAMES = ["small", "medium", "large", "expert"]


@dataclass(frozen=True)
class Price:
    input: float
    output: float


@dataclass(frozen=True)
class Tier:
    name: str
    level: int
    model: str
    price_per_mtok: Price


TIERS = [Tier("small", 1, "smollm2-135m", Price(0.10, 0.20)),
         Tier("medium", 2, "smollm2-135m", Price(0.50, 1.50)),
         Tier("large", 3, "big-model", Price(2.50, 10.00)),
         Tier("expert", 4, "huge-model", Price(10.00, 30.00))]


def policies_config(tenants: dict, log_dir: str, **policy) -> object:
    """A validated PoliciesConfig; tenants: name -> {keys: [plain keys] (ids k0, k1, ...), key_limits and
    key_budgets: {key id: its own}, **policy fields}."""
    raw_tenants = {}
    for name, spec in tenants.items():
        spec = dict(spec)
        keys = [{"id": f"k{i}", "sha256": hash_key(k)} for i, k in enumerate(spec.pop("keys", []))]
        for field, per_key in (("rate_limits", spec.pop("key_limits", {})), ("budgets", spec.pop("key_budgets", {}))):
            for key in keys:
                if key["id"] in per_key:
                    key[field] = per_key[key["id"]]
        raw_tenants[name] = {"keys": keys, **spec}
    policy.setdefault("usage_log", {"dir": log_dir, "fsync": "always"})
    return parse_policies(policy, raw_tenants, TIER_NAMES, "test.yaml")
