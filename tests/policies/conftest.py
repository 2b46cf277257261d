"""Fixtures: the shared Redis under a unique prefix (keys deleted afterwards), and services."""
from __future__ import annotations

import uuid

import pytest
import redis.asyncio as aioredis

from policies.replica import ReplicaState
from policies.service import PolicyService, RedisAccess
from policies.usage_log import UsageLog
from tests.policies.policy_helpers import TIERS, policies_config
from tests.support import SHARED_REDIS, delete_prefix_async


@pytest.fixture
async def shared_redis():
    prefix = f"tgtest-pol:{uuid.uuid4().hex[:10]}:"
    client = aioredis.Redis.from_url(SHARED_REDIS, socket_timeout=2)
    yield client, prefix
    await delete_prefix_async(client, prefix)
    await client.aclose()


@pytest.fixture
def make_service(shared_redis, tmp_path):
    """make_service(tenants, **policy) -> PolicyService on the shared Redis."""
    client, prefix = shared_redis
    made = []

    def make(tenants: dict, redis=None, **policy) -> PolicyService:
        # Tests about exactness must not fail open because a loaded machine answered late.
        timeout_s = policy.pop("redis_timeout_s", 5)  # the gateway's redis.socket_timeout_s, via RedisAccess
        ttl_s = policy.pop("reservation_ttl_s", 600.0)  # the gateway's, from its upstream timeouts
        config = policies_config(tenants, str(tmp_path / "logs"), **policy)
        access = RedisAccess(key_prefix=prefix, timeout_s=timeout_s, retry_after_s=0.5, reservation_ttl_s=ttl_s)
        service = PolicyService(config, redis or client, TIERS, access=access,
                                replica=ReplicaState(UsageLog(config.usage_log, f"usage-test-{len(made)}.jsonl")))
        made.append(service)
        return service

    yield make
    for service in made:
        service.close()
