"""What a tenant may store is bounded: file bodies on disk and not in Redis, per-tenant quotas
for files and stored responses (413 for bytes, 429 for count, naming the quota), uploads
rate-limited like requests, quota given back on delete."""
from __future__ import annotations

import json

import openai
import pytest
import redis.asyncio as aioredis

from policies.keys import hash_key
from tests.gateway.batches.batch_helpers import batch_config, client, jsonl
from tests.support import SHARED_REDIS

LIMITED_KEY = "sk-limited-upload-key"


@pytest.fixture
async def quota_gw(fakes, gateway, redis_prefix, tmp_path):
    (_, url), = await fakes(1)
    doc = batch_config(url, redis_prefix, tmp_path / "usage", lease_s=1)
    doc["tenants"]["acme"]["storage"] = {"files": 2, "stored_responses": 2}
    doc["tenants"]["other"]["storage"] = {"files_bytes": 4096}
    doc["tenants"]["limited"] = {"keys": [{"id": "k", "sha256": hash_key(LIMITED_KEY)}],
                                 "rate_limits": {"requests_per_minute": 2}}
    return await gateway(doc), tmp_path / "files"


def _refusal(err: pytest.ExceptionInfo) -> tuple[int, dict]:
    return err.value.status_code, err.value.body


async def test_an_upload_past_the_files_quota_is_refused_naming_it(quota_gw):
    gw, _ = quota_gw
    async with client(gw.url) as acme, client(gw.url, "other") as other:
        for _ in range(2):
            await acme.files.create(file=("a.jsonl", jsonl(1)), purpose="batch")
        with pytest.raises(openai.APIStatusError) as err:
            await acme.files.create(file=("a.jsonl", jsonl(1)), purpose="batch")
        status, body = _refusal(err)
        assert status == 429 and body["code"] == "storage_quota_exceeded"
        assert "storage.files: 2" in body["message"]

        await other.files.create(file=("b.jsonl", jsonl(20)), purpose="batch")  # about 2.6 KB of 4 KB
        with pytest.raises(openai.APIStatusError) as err:
            await other.files.create(file=("b.jsonl", jsonl(20)), purpose="batch")
        status, body = _refusal(err)
        assert status == 413 and "storage.files_bytes: 4096" in body["message"]


async def test_deleting_a_file_gives_back_its_quota_and_removes_its_body(quota_gw):
    gw, files_dir = quota_gw
    async with client(gw.url) as acme:
        first = await acme.files.create(file=("a.jsonl", jsonl(1)), purpose="batch")
        await acme.files.create(file=("a.jsonl", jsonl(1)), purpose="batch")
        body = files_dir / "t-acme" / first.id
        assert body.read_bytes() == jsonl(1)
        await acme.files.delete(first.id)
        assert not body.exists()
        await acme.files.create(file=("a.jsonl", jsonl(1)), purpose="batch")  # the freed place


async def test_uploads_count_against_the_request_rate_limit(quota_gw):
    gw, _ = quota_gw
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=LIMITED_KEY, max_retries=0) as sdk:
        for _ in range(2):
            await sdk.files.create(file=("a.jsonl", jsonl(1)), purpose="batch")
        with pytest.raises(openai.RateLimitError) as err:
            await sdk.files.create(file=("a.jsonl", jsonl(1)), purpose="batch")
    assert "requests_per_minute" in err.value.body["message"]


async def test_a_stored_response_past_the_quota_is_refused_naming_it(quota_gw):
    gw, _ = quota_gw
    async with client(gw.url) as acme:
        kept = [await acme.responses.create(model="small", input="hi", store=True) for _ in range(2)]
        with pytest.raises(openai.RateLimitError) as err:
            await acme.responses.create(model="small", input="hi", store=True)
        assert "storage.stored_responses: 2" in err.value.body["message"]
        assert err.value.body["code"] == "storage_quota_exceeded"
        unstored = await acme.responses.create(model="small", input="hi", store=False)
        follow = await acme.responses.create(model="small", input="again", previous_response_id=kept[0].id,
                                             store=False)
    assert unstored.id and follow.id  # served: only storing is refused


async def _redis_bytes(prefix: str) -> int:
    """Memory the shared Redis spends on this test's keys."""
    redis = aioredis.from_url(SHARED_REDIS)
    try:
        keys = [k async for k in redis.scan_iter(match=prefix + "*", count=1000)]
        return sum([await redis.memory_usage(k) or 0 for k in keys])
    finally:
        await redis.aclose()


def _big_jsonl(lines: int, line_bytes: int) -> bytes:
    filler = "x" * line_bytes
    return b"".join(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
                                "body": {"model": "small", "max_tokens": 1,
                                         "messages": [{"role": "user", "content": filler}]}}).encode() + b"\n"
                    for i in range(lines))


async def test_redis_holds_file_metadata_only(fakes, gateway, redis_prefix, tmp_path):
    """20 MB uploaded (and a batch made of half of it) grow Redis by under 0.2 MB: under 1 MB per 100 MB."""
    (_, url), = await fakes(1)
    gw = await gateway(batch_config(url, redis_prefix, tmp_path / "usage", lease_s=1))
    content = _big_jsonl(20, 500_000)
    async with client(gw.url) as acme:
        uploaded = [await acme.files.create(file=("big.jsonl", content), purpose="batch") for _ in range(2)]
        batch = await acme.batches.create(input_file_id=uploaded[0].id, endpoint="/v1/chat/completions",
                                          completion_window="24h")
        await acme.batches.cancel(batch.id)
        assert (await acme.files.content(uploaded[1].id)).content == content
    assert sum(f.bytes for f in uploaded) > 20_000_000
    assert await _redis_bytes(redis_prefix) < 200_000
    assert all((tmp_path / "files" / "t-acme" / f.id).stat().st_size == len(content) for f in uploaded)


async def test_stored_responses_count_their_real_size_and_never_pass_the_bytes_quota(
        fakes, gateway, redis_prefix, tmp_path):
    (fake, url), = await fakes(1)
    fake.reply = "r" * 300
    doc = batch_config(url, redis_prefix, tmp_path / "usage")
    doc["tenants"]["acme"]["storage"] = {"stored_responses_bytes": 1024}
    gw = await gateway(doc)
    async with client(gw.url) as acme:
        for _ in range(6):  # answered, stored while the conversation fits, else refused (413) before generating
            try:
                await acme.responses.create(model="small", input="hi", store=True)
            except openai.APIStatusError as err:
                assert err.status_code == 413 and "storage.stored_responses_bytes: 1024" in err.body["message"]
    redis = aioredis.from_url(SHARED_REDIS)
    try:
        used = int(await redis.get(f"{redis_prefix}storage:{{acme}}:responses:bytes"))
        kept = [k async for k in redis.scan_iter(match=f"{redis_prefix}responses:acme:*")]
        real = sum([len(await redis.get(k)) for k in kept])
    finally:
        await redis.aclose()
    assert kept
    assert used == real <= 1024  # each counted at its real size, none past the quota
