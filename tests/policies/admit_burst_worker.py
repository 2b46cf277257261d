"""Run as a separate OS process: connect, print "ready", wait for "go" on stdin, then fire N
concurrent admits for one tenant and print {"admitted", "rejected", "bad"} as JSON. Used by the
two-process rate-limit test; the stdin barrier makes both processes start the burst together
however slowly each one imported."""
from __future__ import annotations

import asyncio
import json
import sys
import tempfile

import redis.asyncio as aioredis

from policies.replica import ReplicaState
from policies.service import PolicyService, RedisAccess
from policies.usage_log import UsageLog
from tests.policies.policy_helpers import TIERS, policies_config
from tests.support import SHARED_REDIS
from wire.errors import OpenAIError


async def main(prefix: str, count: int, tag: str) -> dict:
    client = aioredis.Redis.from_url(SHARED_REDIS, socket_timeout=5)
    config = policies_config({"burst": {"keys": ["kb"], "rate_limits": {"requests_per_minute": 100}}},
                             tempfile.mkdtemp(), on_redis_error="closed")  # a Redis failure must show
    service = PolicyService(config, client, TIERS, access=RedisAccess(prefix, timeout_s=10, retry_after_s=0.5),
                            replica=ReplicaState(UsageLog(config.usage_log)))
    tenant = service.authenticate("Bearer kb")
    await client.ping()  # connect before the starting line
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    outcome = {"admitted": 0, "rejected": 0, "bad": []}

    async def one(i: int) -> None:
        try:
            await service.admit(tenant, f"{tag}-{i}", 20, 16)
            outcome["admitted"] += 1
        except OpenAIError as err:
            ok = err.status == 429 and err.code == "rate_limit_exceeded" and int(err.headers["Retry-After"]) >= 1
            outcome["rejected" if ok else "bad"] += 1 if ok else [err.status, err.code]

    await asyncio.gather(*(one(i) for i in range(count)))
    service.close()
    await client.aclose()
    return outcome


if __name__ == "__main__":
    prefix, count, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    print(json.dumps(asyncio.run(main(prefix, count, tag))))
