"""A Redis of the test's own: uploads grow its memory by metadata only, and once it refuses writes
(maxmemory reached, noeviction) storing answers 503 instead of failing open; deleting still works."""
from __future__ import annotations

import json

import openai
import pytest
import redis.asyncio as aioredis

from tests.gateway.batches.batch_helpers import batch_config, client, jsonl


def _big_jsonl(lines: int, line_bytes: int) -> bytes:
    line = {"custom_id": "r", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "small", "messages": [{"role": "user", "content": "x" * line_bytes}]}}
    return b"".join(json.dumps({**line, "custom_id": f"r{i}"}).encode() + b"\n" for i in range(lines))


async def test_uploads_grow_redis_by_metadata_and_a_full_redis_answers_503(own_redis, fakes, gateway, tmp_path):
    port, _, _ = own_redis
    (_, url), = await fakes(1)
    doc = batch_config(url, "tgfull:", tmp_path / "usage", lease_s=1)
    doc["redis"]["url"] = f"redis://127.0.0.1:{port}/0"
    gw = await gateway(doc)
    redis = aioredis.Redis(port=port)
    content = _big_jsonl(20, 500_000)
    async with client(gw.url) as acme:
        await acme.files.create(file=("warm.jsonl", jsonl(1)), purpose="batch")
        before = (await redis.info("memory"))["used_memory"]
        kept = [await acme.files.create(file=("big.jsonl", content), purpose="batch") for _ in range(2)]
        grown = (await redis.info("memory"))["used_memory"] - before
        assert sum(f.bytes for f in kept) > 20_000_000 and grown < 200_000  # under 1 MB per 100 MB

        await redis.config_set("maxmemory-policy", "noeviction")
        await redis.config_set("maxmemory", 1)
        with pytest.raises(openai.APIStatusError) as upload:
            await acme.files.create(file=("a.jsonl", jsonl(1)), purpose="batch")
        with pytest.raises(openai.APIStatusError) as stored:
            await acme.responses.create(model="small", input="hi", store=True)
        await acme.files.delete(kept[0].id)  # what frees memory still works
    await redis.config_set("maxmemory", 0)
    await redis.aclose()
    assert upload.value.status_code == 503 and stored.value.status_code == 503
    assert stored.value.body["code"] == "service_unavailable"
    assert not (tmp_path / "files" / "t-acme" / kept[0].id).exists()
