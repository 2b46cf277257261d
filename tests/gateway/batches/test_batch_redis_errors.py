"""A Redis error while the runner reads a batch's record is an outage to ride out, not a sign that
the record expired: the batch stays active and is drained once Redis answers (a failover used to
make the runner forget it for good)."""
from __future__ import annotations

import logging
import uuid

import redis.asyncio as aioredis

from tests.gateway.batches.batch_helpers import batch_config, client, jsonl, submit
from tests.support import SHARED_REDIS, wait_for


async def test_a_redis_error_reading_the_record_does_not_forget_the_batch(fakes, gateway, redis_prefix, tmp_path,
                                                                          caplog):
    (_, url), = await fakes(1)
    admin = aioredis.Redis.from_url(SHARED_REDIS)
    user, lease = f"tgtest-{uuid.uuid4().hex[:8]}", f"{redis_prefix}batches:runner"
    await admin.execute_command("ACL", "SETUSER", user, "on", "nopass", "~*", "&*", "+@all")
    await admin.set(lease, "another process", ex=60)  # no runner drains while the batch is created
    try:
        doc = batch_config(url, redis_prefix, tmp_path / "usage", lease_s=1)
        doc["redis"]["url"] = f"redis://{user}@127.0.0.1:6379/0"
        gw = await gateway(doc)
        caplog.set_level(logging.ERROR, logger="gateway.batches.runner")
        async with client(gw.url) as sdk:
            batch = await submit(sdk, jsonl(2))
        # from now on reading a whole hash fails, as every command does while a master fails over
        await admin.execute_command("ACL", "SETUSER", user, "-hgetall")
        await admin.delete(lease)
        await wait_for(lambda: "draining failed" in caplog.text, timeout_s=20, what="the runner meeting the error")
        assert await admin.sismember(f"{redis_prefix}batches:active", f'["acme", "{batch.id}"]')
    finally:
        await admin.execute_command("ACL", "DELUSER", user)
        await admin.aclose()
