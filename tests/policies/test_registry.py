"""The API-managed tenants and keys on the real Redis: two PolicyServices stand for two replicas
(each with its own copy of the registry, following Redis); keys are created, rotated, revoked
and expire; the config's tenants win over the API's; a copy far behind reads everything again."""
from __future__ import annotations

import asyncio
import time

import pytest
from wire.errors import OpenAIError

from policies.registry.cache import RegistryCache
from policies.registry.store import RegistryStore
from policies.replica import ReplicaState
from policies.service import PolicyService, RedisAccess
from policies.usage_log import UsageLog
from tests.policies.policy_helpers import TIERS, policies_config
from tests.support import wait_for


@pytest.fixture
def replicas(shared_redis, tmp_path):
    """make(n) -> n PolicyServices on one prefix, each with its own registry copy being followed."""
    client, prefix = shared_redis
    made, tasks = [], []

    async def make(count: int = 2, tenants: dict | None = None) -> list[PolicyService]:
        config = policies_config(tenants or {"configured": {"keys": ["sk-configured"]}}, str(tmp_path / "logs"),
                                 admin_key_sha256="0" * 64, key_sync_interval_s=0.2)
        access = RedisAccess(key_prefix=prefix, timeout_s=5, retry_after_s=0.5)
        for i in range(count):
            cache = RegistryCache(RegistryStore(client, prefix), 0.2)
            await cache.load()
            tasks.append(asyncio.create_task(cache.follow()))
            made.append(PolicyService(config, client, TIERS, access=access, registry=cache,
                                      replica=ReplicaState(UsageLog(config.usage_log, f"usage-{i}.jsonl"))))
        await wait_for(lambda: all(s.registry.subscribed for s in made), 10, what="subscribed")
        return made

    yield make
    for task in tasks:
        task.cancel()
    for service in made:
        service.close()


def bearer(secret: str) -> str:
    return f"Bearer {secret}"


def refused_with(service: PolicyService, secret: str) -> str | None:
    try:
        service.authenticate(bearer(secret))
    except OpenAIError as exc:
        return exc.code
    return None


async def test_created_key_serves_on_the_other_replica_and_revocation_reaches_both(replicas):
    a, b = await replicas()
    await a.admin.create_tenant("ops", {"name": "team-x", "policy": {"max_tier": "medium",
                                                                     "rate_limits": {"requests_per_minute": 50}}})
    key, secret = await a.admin.create_key("ops", {"tenant": "team-x", "owner": "ana", "allowed_models": ["m1"]})
    assert secret.startswith("sk-tg-") and len(secret) == 6 + 43 and key["prefix"] == secret[:10]
    assert "secret" not in key and all("sha256" not in s for s in key["secrets"])
    assert a.authenticate(bearer(secret)).name == "team-x"  # the writer reads its own write at once
    tenant = await wait_for(lambda: refused_with(b, secret) is None and b.authenticate(bearer(secret)), 5)
    assert tenant.key_id == key["id"] and tenant.policy.max_tier == "medium"
    assert tenant.policy.rate_limits.requests_per_minute == 50 and tenant.policy.allowed_models == ("m1",)

    await b.admin.revoke_key("ops", key["id"])
    await wait_for(lambda: refused_with(a, secret) == "key_revoked", 5, what="revoked on a")
    assert refused_with(b, secret) == "key_revoked"


async def test_rotation_keeps_the_old_secret_for_the_grace_only(replicas):
    a, b = await replicas()
    await a.admin.create_tenant("ops", {"name": "rot"})
    key, old = await a.admin.create_key("ops", {"tenant": "rot"})
    _, new = await a.admin.rotate_key("ops", key["id"], {"grace_s": 2})
    assert new != old
    await wait_for(lambda: refused_with(b, new) is None, 5, what="new secret on b")
    assert refused_with(b, old) is None and refused_with(a, old) is None  # both during the grace
    await wait_for(lambda: refused_with(b, old) == "key_rotated", 10, what="grace over")
    assert refused_with(a, old) == "key_rotated" and refused_with(a, new) is None


async def test_expired_key_is_refused_everywhere(replicas):
    a, b = await replicas()
    await a.admin.create_tenant("ops", {"name": "exp"})
    key, secret = await a.admin.create_key("ops", {"tenant": "exp", "expires_in_s": 1})
    assert key["expires_at"] <= time.time() + 1
    await wait_for(lambda: refused_with(b, secret) == "key_expired", 10, what="expired on b")
    assert refused_with(a, secret) == "key_expired"
    assert b.holder("exp", key["id"]) is None  # batch lines stop with the key


async def test_unknown_and_malformed_keys_are_refused_from_memory(replicas):
    a, = await replicas(1)
    for value in ("Bearer sk-tg-" + "x" * 43, "Bearer nothing", "Basic abc", ""):
        with pytest.raises(OpenAIError) as refused:
            a.authenticate(value)
        assert refused.value.status == 401


async def test_the_config_wins_over_the_api_for_a_tenant_it_names(replicas):
    a, _ = await replicas()
    with pytest.raises(OpenAIError) as refused:
        await a.admin.create_tenant("ops", {"name": "configured", "policy": {"max_tier": "small"}})
    assert refused.value.status == 409 and refused.value.code == "managed_by_config"
    key, secret = await a.admin.create_key("ops", {"tenant": "configured"})  # API keys for a config tenant
    assert a.authenticate(bearer(secret)).name == "configured"
    assert a.authenticate("Bearer sk-configured").key_id == "k0"
    view = a.admin.get_tenant("configured")
    assert view["source"] == "config" and view["config_keys"] == ["k0"]


async def test_bad_bodies_are_400s_naming_the_field(replicas):
    a, _ = await replicas()
    cases = [({"name": "bad name!"}, "name"), ({"name": "t", "policy": {"max_tier": "nope"}}, "policy.max_tier"),
             ({"name": "t", "policy": {"rate_limits": {"requests_per_minute": 0}}},
              "policy.rate_limits.requests_per_minute"), ({"name": "t", "extra": 1}, "extra")]
    for body, param in cases:
        with pytest.raises(OpenAIError) as refused:
            await a.admin.create_tenant("ops", body)
        assert refused.value.status == 400 and refused.value.param == param, (body, refused.value.message)
    with pytest.raises(OpenAIError) as refused:
        await a.admin.create_key("ops", {"tenant": "nobody"})
    assert refused.value.status == 404
    await a.admin.create_tenant("ops", {"name": "t"})
    for body, param in [({"tenant": "t", "budgets": {"yearly_usd": {"hard": 1}}}, "budgets.yearly_usd"), ({"tenant": "t", "expires_in_s": -1},
                                                                       "expires_in_s"),
                        ({"tenant": "t", "metadata": {"k": 1}}, "metadata")]:
        with pytest.raises(OpenAIError) as refused:
            await a.admin.create_key("ops", body)
        assert refused.value.status == 400 and refused.value.param == param


async def test_a_copy_behind_the_capped_feed_reads_everything_again(replicas, shared_redis):
    client, prefix = shared_redis
    a, = await replicas(1)
    await a.admin.create_tenant("ops", {"name": "far"})
    stale = RegistryCache(RegistryStore(client, prefix), 60)
    await stale.load()
    _, secret = await a.admin.create_key("ops", {"tenant": "far"})
    await client.xtrim(a.registry.store.keys.audit(), maxlen=0)  # the feed no longer reaches back
    await a.admin.create_tenant("ops", {"name": "later"})
    await stale.catch_up()
    assert set(stale.tenants) == {"far", "later"} and len(stale.by_digest) == 1


async def test_tenant_with_live_keys_is_not_deleted(replicas):
    a, _ = await replicas()
    await a.admin.create_tenant("ops", {"name": "gone"})
    key, secret = await a.admin.create_key("ops", {"tenant": "gone"})
    with pytest.raises(OpenAIError) as refused:
        await a.admin.delete_tenant("ops", "gone")
    assert refused.value.code == "tenant_has_keys"
    await a.admin.revoke_key("ops", key["id"])
    await a.admin.delete_tenant("ops", "gone")
    assert refused_with(a, secret) == "key_revoked"
    page = await a.admin.audit(10, None)
    assert [e["action"] for e in page["data"]][:3] == ["tenant.delete", "key.revoke", "key.create"]
    assert page["data"][0]["who"] == "ops" and page["data"][0]["before"]["name"] == "gone"


async def test_redis_away_is_a_503_and_a_bad_cursor_a_400(replicas, tmp_path):
    import redis.asyncio as aioredis

    from policies.registry.admin import RegistryAdmin
    from tests.support import free_port

    a, = await replicas(1)
    with pytest.raises(OpenAIError) as refused:
        await a.admin.audit(10, "not-an-id")
    assert refused.value.status == 400 and refused.value.param == "before"
    dead = aioredis.Redis(port=free_port(), socket_timeout=0.5, socket_connect_timeout=0.5)
    offline = RegistryAdmin(RegistryCache(RegistryStore(dead, "tgdead:"), 60), a.config, ["small"], lambda: None)
    for call in (lambda: offline.create_tenant("ops", {"name": "x"}), lambda: offline.get_key("key_1"),
                 lambda: offline.audit(5, None)):
        with pytest.raises(OpenAIError) as refused:
            await call()
        assert refused.value.status == 503 and refused.value.code == "service_unavailable"
    await dead.aclose()


async def test_rebuild_ledger_passes_over_the_audit_logs_beside_the_usage_logs(replicas, tmp_path):
    import glob

    from policies.usage_log import read_records

    a, = await replicas(1)
    await a.admin.create_tenant("ops", {"name": "logged"})  # opens the audit log in the usage-log folder
    folder = a.replica.usage_log.settings.dir
    files = glob.glob(f"{folder}/*.jsonl")
    assert any("/audit-" in f for f in files)
    assert read_records(files) == []  # no usage yet; the audit lines are not read as usage


async def test_a_key_created_and_changed_with_budgets_is_held_to_them_on_every_replica(replicas):
    from policies.budgets import Budgets
    from policies.store import key_budgets_of

    a, b = await replicas()
    await a.admin.create_tenant("ops", {"name": "team-k", "policy": {"budgets": {"weekly_usd": {"hard": 100}}}})
    key, secret = await a.admin.create_key("ops", {"tenant": "team-k", "budgets": {"daily_usd": {"hard": 0.05}}})
    assert key["budgets"] == {"daily_usd": {"hard": 0.05}}
    tenant = await wait_for(lambda: refused_with(b, secret) is None and b.authenticate(bearer(secret)), 5)
    assert key_budgets_of(tenant) == Budgets(daily_hard=50_000) and tenant.policy.budgets.weekly_hard == 100_000_000
    await b.settle(await b.admit(tenant, "r1", 10, 10), "r1", "expert", 1000, 1000)  # 0.04 USD
    with pytest.raises(OpenAIError) as refused:
        await b.admit(tenant, "r2", 10, 1000)  # its worst case passes the key's 0.05
    assert refused.value.status == 429 and refused.value.message.startswith(f"key_daily hard budget of key "
                                                                            f"'{key['id']}'")
    changed = await a.admin.update_key("ops", key["id"], {"budgets": {"weekly_usd": {"soft": 1, "hard": 2}}})
    assert changed["budgets"] == {"weekly_usd": {"soft": 1, "hard": 2}}
    await wait_for(lambda: key_budgets_of(b.authenticate(bearer(secret))).weekly_hard == 2_000_000, 5,
                   what="new budgets on b")
    await b.admit(b.authenticate(bearer(secret)), "r3", 10, 1000)  # the daily budget is gone
    assert (await a.admin.get_key(key["id"]))["budgets"] == {"weekly_usd": {"soft": 1, "hard": 2}}
