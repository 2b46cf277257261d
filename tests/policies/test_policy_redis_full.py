"""A Redis that refuses writes (maxmemory reached, noeviction) is not a Redis outage: with
on_redis_error: open, a settle it refused must not make the next admissions unlimited."""
from __future__ import annotations

import redis.asyncio as aioredis


async def test_a_refused_settle_does_not_open_admission_to_unlimited(own_redis, make_service):
    port, _, _ = own_redis
    client = aioredis.Redis(port=port)
    service = make_service({"t": {"keys": ["k-t"], "rate_limits": {"requests_per_minute": 1000}}}, redis=client,
                           on_redis_error="open")
    tenant = service.authenticate("Bearer k-t")
    admission = await service.admit(tenant, "r1", 10, 10)
    await client.config_set("maxmemory-policy", "noeviction")
    await client.config_set("maxmemory", 1)
    try:
        await service.settle(admission, "r1", "small", 10, 10)  # refused: kept in the usage log, booked later
        after = await service.admit(tenant, "r2", 10, 10)
        assert service.pending_settles == 1
    finally:
        await client.config_set("maxmemory", 0)
    assert after.limited
    await service.replay_pending()
    assert service.pending_settles == 0
    await client.aclose()
