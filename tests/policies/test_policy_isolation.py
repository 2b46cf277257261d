"""Tenant isolation, per-key limits, and token-per-minute charging (estimate up front, real after)."""
from __future__ import annotations

import pytest

from policies.decision_types import RouteRequest, Signal
from tests.policies.policy_helpers import TIERS
from wire.errors import OpenAIError


async def _admitted(service, tenant, n: int, tag: str, tokens: int = 1) -> int:
    ok = 0
    for i in range(n):
        try:
            await service.admit(tenant, f"{tag}-{i}", tokens, 16)
            ok += 1
        except OpenAIError as err:
            assert err.status == 429 and err.code == "rate_limit_exceeded" and int(err.headers["Retry-After"]) >= 1
    return ok


async def test_one_tenant_exhausting_its_limits_never_touches_another(make_service):
    service = make_service({"a": {"keys": ["ka"], "rate_limits": {"requests_per_minute": 5}},
                            "b": {"keys": ["kb"], "rate_limits": {"requests_per_minute": 5}}})
    a, b = service.authenticate("Bearer ka"), service.authenticate("Bearer kb")
    assert await _admitted(service, a, 20, "x") == 5
    assert await _admitted(service, b, 20, "x") == 5   # same request ids, own window


async def test_usage_is_per_tenant_and_only_the_admin_sees_all(make_service):
    from policies.keys import hash_key
    service = make_service({"a": {"keys": ["ka"]}, "b": {"keys": ["kb"]}}, admin_key_sha256=hash_key("root"))
    a, b = service.authenticate("Bearer ka"), service.authenticate("Bearer kb")
    await service.settle(await service.admit(a, "same-id", 10, 10), "same-id", "small", 10, 5)
    await service.settle(await service.admit(b, "same-id", 10, 10), "same-id", "expert", 1000, 1000)
    report_a, report_b = await service.usage(a), await service.usage(b)
    assert report_a["tenant"] == "a" and report_a["month_spend_micro_usd"] == 2
    assert list(report_a["days"][0]["tiers"]) == ["small"]          # nothing of b's shows up
    assert report_b["month_spend_micro_usd"] == 40_000               # b's settle of the same id counted
    everything = await service.usage(service.authenticate("Bearer root"))
    assert {r["tenant"]: r["month_spend_micro_usd"] for r in everything["data"]} == {"a": 2, "b": 40_000}
    assert "data" not in report_a


async def test_per_key_limit_applies_on_top_of_the_tenant_limit(make_service):
    service = make_service({"c": {"keys": ["k0", "k1"], "rate_limits": {"requests_per_minute": 6},
                                  "key_limits": {"k0": {"requests_per_minute": 2}}}})
    k0, k1 = service.authenticate("Bearer k0"), service.authenticate("Bearer k1")
    assert await _admitted(service, k0, 5, "a") == 2
    assert await _admitted(service, k1, 10, "b") == 4     # the tenant's 6 minus k0's 2


async def test_tokens_per_minute_charges_the_worst_case_then_settles_real_usage(make_service):
    service = make_service({"t": {"keys": ["kt"], "rate_limits": {"tokens_per_minute": 1000}}})
    tenant = service.authenticate("Bearer kt")
    first = await service.admit(tenant, "r1", 500, 100)         # prompt + max_tokens: 600 charged
    with pytest.raises(OpenAIError) as err:
        await service.admit(tenant, "r2", 300, 100, n=2)       # 300 + 2 x 100 = 500 > 400 left
    assert err.value.code == "rate_limit_exceeded" and "tokens_per_minute" in err.value.message
    await service.settle(first, "r1", "small", 50, 50)          # real usage 100: 500 tokens come back
    await service.admit(tenant, "r3", 300, 100, n=2)
    second = await service.admit(tenant, "r4", 100, 100, n=2)   # 300 charged, about 100 left
    await service.settle(second, "r4", "small", 250, 2000)      # a long answer puts the bucket in debt
    with pytest.raises(OpenAIError) as err:
        await service.admit(tenant, "r5", 10, 10)
    assert int(err.value.headers["Retry-After"]) > 60           # the debt takes more than a minute to repay


async def test_decide_uses_each_tenants_own_policy(make_service):
    service = make_service({"a": {"keys": ["ka"], "max_tier": "small"}, "b": {"keys": ["kb"]}})
    a, b = service.authenticate("Bearer ka"), service.authenticate("Bearer kb")
    assert service.decide(a, RouteRequest("auto", Signal(4)), TIERS).tier_name == "small"
    assert service.decide(b, RouteRequest("auto", Signal(4)), TIERS).tier_name == "expert"
