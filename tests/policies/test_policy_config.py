"""Config validation (errors name file and field), key hashing, authentication, costs."""
from __future__ import annotations

import subprocess
import sys

import pytest

from gateway.config import load_config
from policies.config import parse_policies
from policies.costs import request_cost_micro, tier_price
from typedconfig import ConfigError
from policies.keys import KeyRing, hash_key
from tests.policies.policy_helpers import TIER_NAMES, TIERS, policies_config
from wire.errors import OpenAIError

EXAMPLE = "policies/examples/tiergate-tenants.yaml"


def _error(policy=None, tenants=None) -> str:
    with pytest.raises(ConfigError) as err:
        parse_policies(policy, tenants, TIER_NAMES, "conf.yaml")
    return str(err.value)


def test_errors_name_the_file_and_the_field():
    assert _error(tenants={"a": {"max_tier": "huge"}}) .startswith("conf.yaml: tenants.a.max_tier: unknown tier")
    assert _error(tenants={"a": {"rate_limits": {"requests_per_minut": 5}}}) == \
        "conf.yaml: tenants.a.rate_limits.requests_per_minut: unknown field"
    assert "tenants.a.keys[0].sha256: must be 64 lowercase hex" in _error(tenants={"a": {"keys": [{"id": "x", "sha256": "abc"}]}})
    assert "policy.defaults.tier_bias: must be an integer" in _error({"defaults": {"tier_bias": "up"}})
    assert "policy.anonymous_tenant: names no tenant" in _error({"anonymous_tenant": "ghost"}, {"a": {}})
    assert "tenants.a.budgets.daily_usd.soft: must not exceed hard" in _error(
        tenants={"a": {"budgets": {"daily_usd": {"soft": 5, "hard": 1}}}})
    assert "policy.on_redis_error: must be one of open, closed" in _error({"on_redis_error": "maybe"})
    h = hash_key("same")
    assert "same key hash already used by tenants.a.keys[0]" in _error(
        tenants={"a": {"keys": [{"id": "x", "sha256": h}]}, "b": {"keys": [{"id": "y", "sha256": h}]}})


def test_tenants_inherit_defaults_field_by_field():
    config = parse_policies({"defaults": {"max_tokens": 100, "rate_limits": {"requests_per_minute": 10,
                                                                            "tokens_per_minute": 1000}}},
                            {"a": {"rate_limits": {"requests_per_minute": 3}}, "b": None}, TIER_NAMES, "c.yaml")
    a, b = config.tenants["a"].policy, config.tenants["b"].policy
    assert (a.max_tokens, a.rate_limits.requests_per_minute, a.rate_limits.tokens_per_minute) == (100, 3, 1000)
    assert b.rate_limits.requests_per_minute == 10


def test_example_config_loads():
    config = load_config(EXAMPLE).policies
    assert set(config.tenants) == {"local", "team-a", "team-b"}
    assert config.tenants["team-b"].policy.budgets.daily_hard == 5_000_000


@pytest.mark.live  # runs `python -m policies`
def test_hash_key_cli_prints_the_sha256_hex():
    out = subprocess.run([sys.executable, "-m", "policies", "hash-key", "sk-123"], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == hash_key("sk-123") and len(out) == 64


def test_authenticate_bearer_keys_admin_and_anonymous(tmp_path):
    config = policies_config({"a": {"keys": ["ka"]}, "b": {"keys": ["kb"]}, "anon": {}}, str(tmp_path),
                             admin_key_sha256=hash_key("root"), anonymous_tenant="anon")
    ring = KeyRing(config)
    assert (ring.authenticate("Bearer ka").name, ring.authenticate("bearer  kb").name) == ("a", "b")
    assert ring.authenticate("Bearer ka").key_id == "k0"
    assert ring.authenticate(None).name == "anon"
    admin = ring.authenticate("Bearer root")
    assert admin.is_admin and not ring.authenticate("Bearer ka").is_admin
    for bad in ("Bearer kc", "Basic ka", "Bearer ", "ka"):
        with pytest.raises(OpenAIError) as err:
            ring.authenticate(bad)
        assert err.value.status == 401 and err.value.body()["error"]["code"] == "invalid_api_key"
    without_anon = KeyRing(policies_config({"a": {"keys": ["ka"]}}, str(tmp_path)))
    with pytest.raises(OpenAIError):
        without_anon.authenticate(None)


def test_cost_is_integer_micro_dollars_rounded_up_once_per_request():
    small, expert = tier_price(TIERS[0]), tier_price(TIERS[3])
    assert request_cost_micro(small, 10, 5) == 2          # 1.0 + 1.0 = 2.0 micro exactly
    assert request_cost_micro(small, 1, 0) == 1           # 0.1 micro -> 1
    assert request_cost_micro(small, 0, 0) == 0
    assert request_cost_micro(expert, 1000, 1000) == 40_000
    assert request_cost_micro(tier_price({"price_per_mtok": {"input": 0.000001, "output": 0}}), 999_999, 0) == 1
    with pytest.raises(ValueError):
        tier_price({"price_per_mtok": {"input": 0.0000001, "output": 0}})  # would need rounding
