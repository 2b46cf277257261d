"""Redis trouble never means unlimited: with `on_redis_error: open` and Redis unreachable, each
gateway replica applies the tenant's limits from its own memory (approximate, never none)."""
from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support import free_port
from tests.support.cut_proxy import CutProxy
from wire.errors import OpenAIError

RPM = 5


async def test_a_gateway_without_redis_still_limits_requests_per_minute(fakes, gateway, tmp_path, http):
    (_, url), = await fakes(1)
    doc = base_config([tier("small", 1, [url])], "tgtest-local:", tenants={
        "t": {"keys": [{"id": "k", "sha256": hash_key("sk-t")}], "rate_limits": {"requests_per_minute": RPM}}},
        policy={"usage_log": {"dir": str(tmp_path / "usage")}, "on_redis_error": "open"})
    doc["redis"]["url"] = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    gw = await gateway(doc)
    body = {"model": "small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    statuses, refusal = [], None
    for _ in range(RPM + 3):
        async with http.post(gw.url + "/v1/chat/completions", json=body,
                             headers={"Authorization": "Bearer sk-t"}) as answer:
            statuses.append(answer.status)
            if answer.status == 429:
                refusal = (await answer.json())["error"]
    assert statuses == [200] * RPM + [429] * 3
    assert refusal["code"] == "rate_limit_exceeded" and "tenant_requests_per_minute" in refusal["message"]


@pytest.fixture
def redis_proxy():
    """A CutProxy in front of the shared Redis, listening; cut() is Redis going away."""
    proxy = CutProxy()
    proxy.restore()
    yield proxy
    proxy.close()


async def test_local_hard_budget_counts_spend_settled_during_the_outage(make_service, redis_proxy):
    client = aioredis.from_url(redis_proxy.url, socket_connect_timeout=0.2)
    service = make_service({"t": {"keys": ["kt"], "budgets": {"daily_usd": {"hard": 0.0001}}}},
                           redis=client, on_redis_error="open", redis_timeout_s=0.5)
    tenant = service.authenticate("Bearer kt")
    await service.settle(await service.admit(tenant, "req-0", 1, 1, tiers=["small"]), "req-0", "small", 0, 0)
    redis_proxy.cut()  # the spend was read once (nothing spent yet); now Redis is away
    first = await service.admit(tenant, "req-1", 100, 200, tiers=["small"])  # 50 micro-USD worst case
    assert not first.limited                                                 # admitted by local limits
    await service.admit(tenant, "req-2", 100, 200, tiers=["small"])          # 100 held: the budget is full
    with pytest.raises(OpenAIError) as err:
        await service.admit(tenant, "req-3", 1, 1, tiers=["small"])
    assert err.value.code == "budget_exceeded" and "daily" in err.value.message
    await service.settle(first, "req-1", "small", 100, 200)                  # 50 spent, queued for Redis
    with pytest.raises(OpenAIError):                                          # spent + held still full
        await service.admit(tenant, "req-4", 1, 1, tiers=["small"])
    await client.aclose()


async def test_a_replica_that_never_read_the_spend_refuses_hard_budget_requests_while_redis_is_away(
        make_service):
    """It would count the hard budget from 0 (another replica may have spent it all): 503 instead,
    while a tenant without a hard budget is still served under local limits."""
    client = aioredis.Redis(port=free_port(), socket_connect_timeout=0.2)  # nothing listens there
    service = make_service({"capped": {"keys": ["kc"], "budgets": {"monthly_usd": {"hard": 100}}},
                            "uncapped": {"keys": ["ku"]}}, redis=client, on_redis_error="open", redis_timeout_s=0.5)
    with pytest.raises(OpenAIError) as err:
        await service.admit(service.authenticate("Bearer kc"), "req-1", 10, 10, tiers=["small"])
    assert err.value.status == 503 and "not read yet" in err.value.message
    assert not (await service.admit(service.authenticate("Bearer ku"), "req-2", 10, 10, tiers=["small"])).limited
    await client.aclose()
