"""The monitor's parts on their own: config validation, cheap checks, the shared controller
script on the real Redis (hysteresis, bounds, fresh evidence), shift mapping, admin access,
and Redis outages that must not reach clients."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis

from gateway.config import ConfigError, parse_config
from gateway.quality.checks import Answer, failed_checks, script_of
from gateway.quality.config import QualityConfig
from gateway.quality.controller import Controller
from gateway.quality.store import QualityStore
from tests.gateway.quality.quality_helpers import two_tier_config
from tests.support import SHARED_REDIS, wait_for
from wire.errors import OpenAIError


def _cfg(quality) -> object:
    return parse_config(two_tier_config("http://a:1", "http://b:2", "p:", quality), "t.yaml")


def test_config_defaults_and_errors_name_the_field():
    q = _cfg({}).quality
    assert (q.enabled, q.sampling_rate, q.similarity_threshold, q.window, q.trigger) == (True, 0.05, 0.85, 50, 0.15)
    doc = two_tier_config("http://a:1", "http://b:2", "p:", {})
    del doc["quality"]
    assert parse_config(doc).quality.enabled is False  # no section: off
    with pytest.raises(ConfigError, match=r"t.yaml: quality.recover: must be below trigger"):
        _cfg({"trigger": 0.1, "recover": 0.2})
    with pytest.raises(ConfigError, match=r"quality.sampling_rate: must be between 0 and 1"):
        _cfg({"sampling_rate": 2})
    with pytest.raises(ConfigError, match=r"quality.bogus: unknown field"):
        _cfg({"bogus": 1})
    with pytest.raises(ConfigError, match=r"tiers\[0\].max_tokens_cap"):
        parse_config(two_tier_config("http://a:1", "http://b:2", "p:", {}, small_cap=0))


def test_cheap_checks_are_relative_to_the_reference():
    ref = Answer("The capital of France is Paris, which is also its largest city.", "stop", 14)
    assert failed_checks(Answer("", "stop", 0), ref) == ["empty"]
    assert failed_checks(Answer("The capital", "length", 2), ref) == ["truncated"]
    assert failed_checks(Answer("The capital", "length", 2), Answer("The capital of", "length", 2)) == []
    assert failed_checks(Answer("I'm sorry, but I can't help with that.", "stop", 9), ref) == ["refusal"]
    assert failed_checks(Answer("Столица Франции — Париж, крупнейший город страны.", "stop", 12), ref) == \
        ["wrong_language"]
    assert script_of("short") is None and script_of("日本の首都は東京です。とても大きな都市です") == "CJK"


def test_shift_moves_the_boundary_above_a_failing_tier():
    @dataclass
    class T:
        name: str
        level: int
    tiers = [T("small", 1), T("medium", 2), T("top", 4)]
    c = Controller()
    c.update({"a": {"small": 2, "medium": 1, "top": 0}, "b": {"medium": 2}}, tiers, 0.1, {2: 0.5, 3: 0.5, 4: 0.5})
    assert c.shift_of("a") == {2: -0.2, 3: -0.1} and c.shift_of("b") == {3: -0.2} and c.shift_of("c") == {}
    assert c.shift == {2: -0.2, 3: -0.2}  # the views' summary: the largest shift any tenant has


async def test_controller_script_steps_once_per_fresh_window_with_hysteresis(redis_prefix):
    client = aioredis.from_url(SHARED_REDIS)
    store = QualityStore(client, redis_prefix)
    q = QualityConfig(window=10, min_samples=5, trigger=0.3, recover=0.1, max_steps=2)
    results = [await store.record("t", "small", 1, True, q) for _ in range(4)]
    assert [r.step for r in results] == [0, 0, 0, 0]  # not enough evidence yet
    fifth = await store.record("t", "small", 1, True, q)
    assert (fifth.step, fifth.changed, fifth.failure_rate) == (1, 1, 1.0)
    # the same stale failures cannot push further: the next step needs 5 fresh samples
    assert [(await store.record("t", "small", 1, True, q)).step for _ in range(4)] == [1, 1, 1, 1]
    assert (await store.record("t", "small", 1, True, q)).step == 2
    assert (await store.record("t", "small", 1, True, q)).step == 2  # bounded by max_steps
    # 2 failures in 5 fresh samples: between recover and trigger -> no change either way
    for failed in (False, True, False, False, False):
        r = await store.record("t", "small", 1, failed, q)
    assert r.step == 2
    passes = 0
    while r.changed != -1:  # relaxes only once the failures have left the window (rate < recover)
        r = await store.record("t", "small", 1, False, q)
        passes += 1
    assert r.step == 1 and passes == 7 and r.window_failures == 0
    assert await store.steps() == {"t": {"small": 1}}
    changes = await store.recent_changes(10)
    assert [c["to_step"] for c in changes] == ["1", "2", "1"] and "below the recover" in changes[0]["reason"]
    assert await store.window(store.keys["class"] + "1") == (0, 10)
    await client.aclose()


async def test_a_tenants_verdicts_move_only_its_own_adjustment(redis_prefix):
    client = aioredis.from_url(SHARED_REDIS)
    store = QualityStore(client, redis_prefix)
    q = QualityConfig(window=10, min_samples=5, trigger=0.3, recover=0.1, max_steps=2)
    for _ in range(3):
        await store.record("quiet:one", "small", 1, False, q)
    for _ in range(50):  # ten times the volume, every answer failing
        await store.record("noisy", "small", 1, True, q)
    for _ in range(3):
        await store.record("quiet:one", "small", 1, False, q)
    assert await store.steps() == {"noisy": {"small": 2}, "quiet:one": {}}
    assert await store.window(store.keys["tier"] + "small") == (7, 10)  # every tenant's: shown, never acted on
    assert {c["tenant"] for c in await store.recent_changes(10)} == {"noisy"}
    await client.aclose()


async def test_quality_endpoint_needs_the_admin_key_with_policies(fakes, gateway, redis_prefix, http):
    @dataclass(frozen=True)
    class Tenant:
        name: str
        is_admin: bool = False

    class KeyedPolicy:
        from gateway.core.policy_seam import OpenPolicy as _Open
        _open = _Open()

        def authenticate(self, authorization):
            if authorization == "Bearer admin":
                return Tenant("_admin", True)
            if authorization == "Bearer team":
                return Tenant("team")
            raise OpenAIError(401, "bad key", code="invalid_api_key")

        def decide(self, *args):
            return self._open.decide(*args)

        async def count_request(self, tenant, request_id):
            return None

        async def hold(self, tenant):
            return None

        async def let_go(self, slot):
            return None

        async def admit(self, *args, **kwargs):
            return None

        async def settle(self, *args):
            return None

    (_, small_url), (_, top_url) = await fakes(2)
    gw = await gateway(two_tier_config(small_url, top_url, redis_prefix, {"sampling_rate": 0.5}),
                       policy_factory=lambda config, redis: KeyedPolicy())
    for key, status in (("team", 403), ("admin", 200)):
        async with http.get(gw.url + "/v1/quality", headers={"Authorization": f"Bearer {key}"}) as r:
            assert r.status == status
            body = await r.json()
    assert body["sampling_rate"] == 0.5 and body["tiers"]["small"]["adjustment_steps"] == 0
    async with http.post(gw.url + "/admin/classifier/reload", headers={"Authorization": "Bearer team"}) as r:
        assert r.status == 403 and (await r.json())["error"]["code"] == "admin_required"


async def test_redis_outage_costs_samples_not_requests(fakes, gateway, redis_prefix, http):
    (_, small_url), (_, top_url) = await fakes(2)
    doc = two_tier_config(small_url, top_url, redis_prefix, {"sampling_rate": 1.0})
    doc["redis"]["url"] = "redis://127.0.0.1:1/0"  # nothing listens there
    gw = await gateway(doc)
    for i in range(3):
        async with http.post(gw.url + "/v1/chat/completions", json={
                "model": "small", "max_tokens": 4, "messages": [{"role": "user", "content": f"Hi {i}"}]}) as r:
            assert r.status == 200
    await wait_for(lambda: _scored(gw, 3))
    async with http.get(gw.url + "/metrics") as r:
        assert 'tiergate_redis_errors_total{op="quality"}' in await r.text()
    async with http.get(gw.url + "/v1/quality") as r:
        assert r.status == 503 and (await r.json())["error"]["code"] == "store_unavailable"


async def _scored(gw, n: int) -> bool:
    counts = gw.state.quality.counts
    return counts["passed"] + counts["failed"] >= n


def test_the_reference_tier_is_one_the_tenant_may_use_unless_the_operator_pays_beyond():
    from gateway.quality.monitor import reference_tier

    config = _cfg({})
    assert reference_tier(config, ("small", "top"), beyond_policy=False).name == "top"
    assert reference_tier(config, ("small",), beyond_policy=False).name == "small"  # then nothing above: no sample
    assert reference_tier(config, (), beyond_policy=False) is None
    assert reference_tier(config, ("small",), beyond_policy=True).name == "top"
