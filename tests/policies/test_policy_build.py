"""build_service: the gateway's entry point. A bad tenants section is the gateway's ConfigError
(so a reload is rejected and the old config kept); a good one yields a working service."""
from __future__ import annotations

import time

import pytest
from redis.exceptions import RedisError

from gateway.config import ConfigError, parse_config
from gateway.core.policy_seam import build_policy_service
from policies.keys import hash_key
from policies.redis_errors import RedisUnavailable
from policies.service import PolicyService, RedisAccess


def _doc(tmp_path, **tenant) -> dict:
    return {"tiers": [{"name": "small", "level": 1, "model": "m", "price_per_mtok": {"input": 0.1, "output": 0.2},
                       "workers": [{"url": "http://127.0.0.1:9"}]}],
            "policy": {"usage_log": {"dir": str(tmp_path)}},
            "tenants": {"a": {"keys": [{"id": "k", "sha256": hash_key("ka")}], **tenant}}}


def test_seam_builds_the_policy_service_and_errors_name_file_and_field(shared_redis, tmp_path):
    client, _ = shared_redis
    service = build_policy_service(parse_config(_doc(tmp_path), "gw.yaml"), client)
    assert isinstance(service, PolicyService)
    assert service.authenticate("Bearer ka").name == "a"
    with pytest.raises(ConfigError) as err:
        build_policy_service(parse_config(_doc(tmp_path, max_tier="gigantic"), "gw.yaml"), client)
    assert str(err.value).startswith("gw.yaml: tenants.a.max_tier: unknown tier 'gigantic'")
    with pytest.raises(ConfigError, match="tenants: need Redis"):
        build_policy_service(parse_config(_doc(tmp_path), "gw.yaml"), None)


def test_the_service_uses_the_redis_section_knobs(shared_redis, tmp_path):
    client, _ = shared_redis
    doc = {**_doc(tmp_path), "redis": {"key_prefix": "pfx:", "socket_timeout_s": 0.7, "retry_after_s": 1.5}}
    service = build_policy_service(parse_config(doc, "gw.yaml"), client)
    assert service.access == RedisAccess(key_prefix="pfx:", timeout_s=0.7, retry_after_s=1.5,
                                         reservation_ttl_s=3 * (2.0 + 120.0) + 60)  # attempts x timeouts + 1 min
    assert service.store.keys.prefix == "pfx:"


async def test_a_redis_failure_skips_redis_for_retry_after_s(make_service):
    service = make_service({"a": {"keys": ["ka"]}})

    async def broken():
        raise RedisError("down")

    before = time.monotonic()
    with pytest.raises(RedisUnavailable):
        await service.call_redis("admit", broken)
    after = time.monotonic()
    retry = service.access.retry_after_s
    assert before + retry <= service.replica.redis_down_until <= after + retry
    with pytest.raises(RedisUnavailable):  # skipped without calling Redis
        await service.call_redis("admit", lambda: pytest.fail("Redis was called while skipped"))


def test_services_rebuilt_by_a_reload_share_the_replica_log(shared_redis, tmp_path):
    client, _ = shared_redis
    first = build_policy_service(parse_config(_doc(tmp_path), "gw.yaml"), client)
    second = build_policy_service(parse_config(_doc(tmp_path), "gw.yaml"), client)
    assert first.replica is second.replica and first.usage_log is second.usage_log


async def _send_packed_command(writer):
    """Named like redis-py's write step: what a command on a connection closed under it raises."""
    writer.writelines([b"PING"])


async def test_a_command_that_never_left_is_sent_once_more(make_service):
    service = make_service({"a": {"keys": ["ka"]}})
    calls = []

    async def closed_then_open():
        calls.append(1)
        if len(calls) == 1:
            await _send_packed_command(None)  # AttributeError: 'NoneType' object has no attribute 'writelines'
        return "sent"

    assert await service.call_redis("admit", closed_then_open) == "sent" and len(calls) == 2

    async def always_closed():
        calls.append(1)
        await _send_packed_command(None)

    with pytest.raises(RedisUnavailable):  # once more, not forever
        await service.call_redis("admit", always_closed)
    assert len(calls) == 4


async def test_other_attribute_errors_are_not_resent(make_service):
    service = make_service({"a": {"keys": ["ka"]}})
    calls = []

    async def after_sending():
        calls.append(1)
        return None.read_response  # an error past the write: the command may have run

    with pytest.raises(RedisUnavailable):
        await service.call_redis("admit", after_sending)
    assert len(calls) == 1
