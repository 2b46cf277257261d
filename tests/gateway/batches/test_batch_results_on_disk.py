"""Batch results go to the tenant's files on disk as they come, within its storage quota: Redis
keeps progress only, a batch whose results would pass `storage.files_bytes` fails naming it, and
a writer that died mid-line leaves no half or doubled line behind."""
from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from gateway.batches.bodies import FileBodies
from gateway.batches.files import FileStore
from gateway.batches.spool import ResultSpool
from gateway.batches.storage_quota import Quota
from gateway.batches.store import BatchStore
from tests.gateway.batches.batch_helpers import batch_config, client, finished, jsonl, lines_of, submit, until
from tests.support import SHARED_REDIS

BATCH = "batch_" + "ab" * 12


@pytest.fixture
async def spool_parts(redis_prefix, tmp_path):
    redis = aioredis.from_url(SHARED_REDIS)
    bodies = FileBodies(tmp_path)
    files, batches = FileStore(redis, redis_prefix, 3600, bodies), BatchStore(redis, redis_prefix, 3600, bodies)
    await redis.hset(batches.key("acme", BATCH), mapping={"completed": 0, "failed": 0, "input_tokens": 0,
                                                          "output_tokens": 0})
    yield files, batches
    await redis.aclose()


def _spool(parts, quota_bytes: int = 1 << 20) -> ResultSpool:
    files, batches = parts
    return ResultSpool(files, batches, "acme", BATCH, Quota(10, quota_bytes, "storage.files", "storage.files_bytes"),
                       3600)


async def test_a_line_is_kept_once_and_what_a_dead_writer_left_past_it_is_cut(spool_parts):
    first = _spool(spool_parts)
    assert await first.append(0, b'{"line": 0}', True, (3, 4))
    with open(first.path("output"), "ab") as handle:  # a writer killed after writing, before recording
        handle.write(b'{"line": 1, "half')
    restarted = _spool(spool_parts)
    assert not await restarted.append(0, b'{"line": 0, "again": true}', True, (3, 4))  # answered twice: kept once
    assert await restarted.append(1, b'{"line": 1}', True, (1, 1))
    assert await restarted.append(2, b'{"line": 2, "error": 1}', False, (0, 0))
    assert restarted.path("output").read_bytes() == b'{"line": 0}\n{"line": 1}\n'
    assert restarted.path("errors").read_bytes() == b'{"line": 2, "error": 1}\n'
    _, batches = spool_parts
    fields = await batches.redis.hgetall(batches.key("acme", BATCH))
    assert (int(fields[b"completed"]), int(fields[b"failed"]), int(fields[b"input_tokens"])) == (2, 1, 4)
    assert await batches.done("acme", BATCH) == {0, 1, 2}


async def test_a_line_past_the_quota_is_refused_and_not_written(spool_parts):
    spool = _spool(spool_parts, quota_bytes=1024)
    assert await spool.append(0, b"x" * 600, True, (0, 0))
    with pytest.raises(Exception) as err:
        await spool.append(1, b"y" * 600, True, (0, 0))
    assert err.value.status == 413 and "storage.files_bytes: 1024" in err.value.message
    assert spool.path("output").read_bytes() == b"x" * 600 + b"\n"
    assert await spool_parts[1].done("acme", BATCH) == {0}


async def _redis_values(prefix: str) -> bytes:
    """Every value under this test's prefix, strings and hashes, run together."""
    redis = aioredis.from_url(SHARED_REDIS)
    try:
        found = []
        async for key in redis.scan_iter(match=prefix + "*", count=1000):
            kind = (await redis.type(key)).decode()
            if kind == "string":
                found.append(await redis.get(key))
            elif kind == "hash":
                found.extend(v for pair in (await redis.hgetall(key)).items() for v in pair)
        return b"".join(found)
    finally:
        await redis.aclose()


async def test_redis_holds_no_answer_while_a_batch_runs(fakes, gateway, redis_prefix, tmp_path):
    (fake, url), = await fakes(1)
    fake.reply, fake.delay_s = "long answer " * 500, 0.2
    gw = await gateway(batch_config(url, redis_prefix, tmp_path / "usage", lease_s=1, max_in_flight=1))
    async with client(gw.url) as sdk:
        batch = await submit(sdk, jsonl(30, max_tokens=3))
        await until(sdk, batch.id, lambda b: b.request_counts.completed >= 2)
        values = await _redis_values(redis_prefix)
        assert (await sdk.batches.retrieve(batch.id)).status == "in_progress"  # looked at mid-batch
        await sdk.batches.cancel(batch.id)
        done = await finished(sdk, batch.id)
        out = await lines_of(sdk, done.output_file_id)
    assert b"long answer" not in values and b"chat.completion" not in values
    assert len(out) == done.request_counts.completed >= 2
    assert all(line["response"]["body"]["choices"][0]["message"]["content"] == fake.reply for line in out)


async def test_a_batch_whose_results_pass_the_quota_fails_naming_it(fakes, gateway, redis_prefix, tmp_path):
    (fake, url), = await fakes(1)
    fake.reply = "z" * 1500
    doc = batch_config(url, redis_prefix, tmp_path / "usage", lease_s=1, max_in_flight=1)
    doc["tenants"]["acme"]["storage"] = {"files_bytes": 8192}
    gw = await gateway(doc)
    async with client(gw.url) as sdk:
        done = await finished(sdk, (await submit(sdk, jsonl(20, max_tokens=3))).id)
        out = await lines_of(sdk, done.output_file_id)
        kept = (await sdk.files.list()).data
    assert done.status == "failed"
    error = done.errors.data[0]
    assert error.code == "storage_quota_exceeded" and "storage.files_bytes: 8192" in error.message
    assert 0 < len(out) == done.request_counts.completed < 20
    assert sum(f.bytes for f in kept) <= 8192
    bodies = [p for p in (tmp_path / "files" / "t-acme").iterdir() if not p.name.endswith(".input")]
    assert sum(p.stat().st_size for p in bodies) <= 8192  # the input's second name shares the input's bytes
    assert len({line["custom_id"] for line in out}) == len(out)
