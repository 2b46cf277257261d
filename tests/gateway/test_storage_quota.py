"""The storage quota ledger on the shared Redis: counts and bytes refused past the quota,
overwriting an item counts it once, and expiry and release give quota back."""
from __future__ import annotations

import time

import pytest
import redis.asyncio as aioredis

from gateway.batches.storage_quota import Quota, StorageQuota
from tests.support import SHARED_REDIS
from wire.errors import OpenAIError

QUOTA = Quota(2, 1000, "storage.files", "storage.files_bytes")


@pytest.fixture
async def ledger(redis_prefix):
    client = aioredis.from_url(SHARED_REDIS)
    yield StorageQuota(client, redis_prefix, "files", "files", 3600)
    await client.aclose()


async def test_past_the_count_is_429_past_the_bytes_is_413(ledger):
    later = int(time.time()) + 3600
    await ledger.reserve("t", "a", 600, later, QUOTA)
    with pytest.raises(OpenAIError) as over_bytes:
        await ledger.reserve("t", "b", 401, later, QUOTA)
    assert over_bytes.value.status == 413 and "storage.files_bytes: 1000" in over_bytes.value.message
    await ledger.reserve("t", "a", 900, later, QUOTA)  # the same item again: replaced, not added
    assert await ledger.room("t", QUOTA) == 100
    await ledger.reserve("t", "b", 100, later, QUOTA)
    with pytest.raises(OpenAIError) as over_count:
        await ledger.reserve("t", "c", 0, later, QUOTA)
    assert over_count.value.status == 429 and "storage.files: 2" in over_count.value.message
    assert (await ledger.reserve("other", "c", 1000, later, QUOTA)).used == 1000  # tenants are apart


async def test_expiry_and_release_give_quota_back(ledger):
    gone = await ledger.reserve("t", "old", 800, int(time.time()) - 1, QUOTA)  # already expired
    assert gone.expired == []
    kept = await ledger.reserve("t", "new", 900, int(time.time()) + 3600, QUOTA)
    assert kept.expired == ["old"] and kept.used == 900
    await ledger.release("t", "new")
    assert await ledger.room("t", QUOTA) == 1000
