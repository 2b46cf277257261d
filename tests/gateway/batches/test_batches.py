"""The OpenAI Batch API through the real `openai` SDK: upload, create, poll, download; each
line goes through routing, admission and billing at batch priority; tenants are kept apart;
bad files are refused naming the line; cancel and expiry end a batch with what finished."""
from __future__ import annotations

import json
import time

import openai
import pytest
import redis.asyncio as aioredis

from tests.gateway.batches.batch_helpers import batch_config, client, finished, jsonl, lines_of, submit, until, usage_of
from tests.gateway.gw_helpers import tier
from gateway.core.metrics import METRICS
from tests.support import SHARED_REDIS, wait_for


@pytest.fixture
async def stack(fakes, gateway, redis_prefix, tmp_path):
    (fake, url), = await fakes(1)
    gw = await gateway(batch_config(url, redis_prefix, tmp_path / "usage", lease_s=1))
    return gw, fake


async def test_a_batch_runs_every_line_once_and_bills_it(stack):
    gw, fake = stack
    async with client(gw.url) as sdk:
        batch = await submit(sdk, jsonl(12, max_tokens=5))
        assert batch.status == "in_progress" and batch.request_counts.total == 12
        done = await finished(sdk, batch.id)
        assert done.status == "completed", done
        assert (done.request_counts.completed, done.request_counts.failed) == (12, 0)
        assert done.error_file_id is None and done.completed_at >= done.created_at
        out = await lines_of(sdk, done.output_file_id)
        usage = await usage_of(sdk)
        with pytest.raises(openai.BadRequestError) as err:
            await sdk.batches.cancel(batch.id)
        assert "completed and can no longer be cancelled" in err.value.body["message"]
    assert sorted(line["custom_id"] for line in out) == sorted(f"req-{i}" for i in range(12))  # as they finished
    assert all(line["response"]["status_code"] == 200 and line["error"] is None for line in out)
    answers = [line["response"]["body"] for line in out]
    assert all(a["object"] == "chat.completion" and a["usage"]["completion_tokens"] > 0 for a in answers)
    assert done.usage.output_tokens == sum(a["usage"]["completion_tokens"] for a in answers)
    billed = [t for day in usage["days"] for t in day["tiers"].values()]
    assert sum(t["requests"] for t in billed) == 12  # billed once per line
    assert sum(t["completion_tokens"] for t in billed) == done.usage.output_tokens
    assert usage["month_spend_micro_usd"] > 0
    assert fake.served >= 12  # more only if Redis lost a result and its line ran again
    batch_headers = [seen["headers"] for seen in fake.seen if "headers" in seen]
    assert batch_headers and all(h.get("x-tiergate-priority") == "batch" for h in batch_headers)


async def test_auto_routes_each_line_and_a_bad_line_fails_alone(stack):
    gw, _ = stack
    content = jsonl(3, model="auto") + jsonl(1, model="auto", max_tokens=0).replace(b"req-0", b"bad-0")
    async with client(gw.url) as sdk:
        done = await finished(sdk, (await submit(sdk, content)).id)
        out, errors = await lines_of(sdk, done.output_file_id), await lines_of(sdk, done.error_file_id)
    assert (done.status, done.request_counts.completed, done.request_counts.failed) == ("completed", 3, 1)
    assert [e["custom_id"] for e in errors] == ["bad-0"]
    assert errors[0]["response"]["status_code"] == 400
    assert errors[0]["response"]["body"]["error"]["param"] == "max_tokens"
    assert all(line["response"]["body"]["model"] for line in out)


async def test_another_tenant_sees_neither_the_file_nor_the_batch(stack):
    gw, _ = stack
    async with client(gw.url) as acme, client(gw.url, "other") as other:
        batch = await submit(acme, jsonl(2))
        for call in (lambda: other.batches.retrieve(batch.id), lambda: other.files.retrieve(batch.input_file_id),
                     lambda: other.files.content(batch.input_file_id), lambda: other.batches.cancel(batch.id)):
            with pytest.raises(openai.NotFoundError):
                await call()
        with pytest.raises(openai.NotFoundError):
            await other.batches.create(input_file_id=batch.input_file_id, endpoint="/v1/chat/completions",
                                       completion_window="24h")
        assert [b.id async for b in other.batches.list()] == []
        assert [b.id async for b in acme.batches.list()] == [batch.id]
        await finished(acme, batch.id)


@pytest.mark.parametrize("content, named", [
    (jsonl(1) + b"{not json\n", "line 2 of the file: is not valid JSON"),
    (jsonl(2).replace(b"req-1", b"req-0"), "line 2 of the file: 'custom_id' 'req-0' is used by an earlier line"),
    (jsonl(1) + b'{"custom_id": "x", "method": "GET", "url": "/v1/chat/completions", "body": {}}\n',
     "line 2 of the file: 'method' must be 'POST'"),
    (b'\n{"custom_id": "x", "method": "POST", "url": "/v1/images", "body": {}}\n', "line 2 of the file: 'url'"),
    (jsonl(1, stream=True), "line 1 of the file: 'stream' is not supported"),
    (b"", "the file holds no requests"),
])
async def test_a_malformed_file_is_refused_naming_its_line(stack, content, named):
    gw, _ = stack
    async with client(gw.url) as sdk:
        with pytest.raises(openai.BadRequestError) as err:
            await sdk.files.create(file=("batch.jsonl", content), purpose="batch")
    assert named in err.value.body["message"] and err.value.body["param"] == "file"


async def test_batch_requests_are_checked_by_name(stack):
    gw, _ = stack
    async with client(gw.url) as sdk:
        uploaded = await sdk.files.create(file=("batch.jsonl", jsonl(1)), purpose="batch")
        bad = [({"endpoint": "/v1/embeddings"}, "input_file_id"), ({"completion_window": "48h"}, "completion_window"),
               ({"endpoint": "/v1/images"}, "endpoint"), ({"metadata": {"k": "v" * 600}}, "metadata"),
               ({"extra_body": {"priority": "high"}}, "priority")]
        for change, param in bad:
            args = {"input_file_id": uploaded.id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
            extra = change.pop("extra_body", None)
            with pytest.raises(openai.BadRequestError) as err:
                await sdk.batches.create(**{**args, **change}, extra_body=extra)
            assert err.value.body["param"] == param, (change, err.value.body)
        with pytest.raises(openai.BadRequestError) as err:
            await sdk.files.create(file=("notes.jsonl", jsonl(1)), purpose="fine-tune")
        assert err.value.body["param"] == "purpose"


async def test_limits_on_files_lines_and_active_batches(fakes, gateway, redis_prefix, tmp_path):
    (_, url), = await fakes(1)
    gw = await gateway(batch_config(url, redis_prefix, tmp_path / "usage", max_file_bytes=2048, max_lines=3,
                                    max_active_per_tenant=1, max_in_flight=1))
    async with client(gw.url) as sdk:
        with pytest.raises(openai.APIStatusError) as err:
            await sdk.files.create(file=("big.jsonl", jsonl(40)), purpose="batch")
        assert err.value.status_code == 413
        with pytest.raises(openai.BadRequestError) as err:
            await sdk.files.create(file=("four.jsonl", jsonl(4)), purpose="batch")
        assert "line 4 of the file" in err.value.body["message"]
        first = await submit(sdk, jsonl(3))
        with pytest.raises(openai.RateLimitError):
            await submit(sdk, jsonl(1))
        await finished(sdk, first.id)
        await finished(sdk, (await submit(sdk, jsonl(1))).id)  # room again once the first ended


async def _slow_stack(fakes, gateway, redis_prefix, tmp_path, max_in_flight: int):
    """A gateway whose upstream takes 0.2 s a line, so a batch is still running when the test acts."""
    (fake, url), = await fakes(1)
    fake.delay_s = 0.2
    return await gateway(batch_config(url, redis_prefix, tmp_path / "usage", max_in_flight=max_in_flight)), fake


async def test_cancel_stops_dispatching_and_reports_what_finished(fakes, gateway, redis_prefix, tmp_path):
    gw, fake = await _slow_stack(fakes, gateway, redis_prefix, tmp_path, max_in_flight=2)
    async with client(gw.url) as sdk:
        batch = await submit(sdk, jsonl(40))
        await until(sdk, batch.id, lambda b: b.request_counts.completed >= 2)
        cancelling = await sdk.batches.cancel(batch.id)
        assert cancelling.status in ("cancelling", "cancelled")
        done = await finished(sdk, batch.id)
        served = fake.served
        out = await lines_of(sdk, done.output_file_id)
        assert (await sdk.batches.cancel(batch.id)).status == "cancelled"  # cancelling again changes nothing
    assert done.status == "cancelled" and done.cancelled_at is not None
    assert 2 <= done.request_counts.completed < 40
    assert len(out) == done.request_counts.completed == served  # nothing ran after the cancel took hold


async def test_lines_past_the_completion_window_fail_as_expired(fakes, gateway, redis_prefix, tmp_path):
    gw, _ = await _slow_stack(fakes, gateway, redis_prefix, tmp_path, max_in_flight=1)
    async with client(gw.url) as sdk:
        batch = await submit(sdk, jsonl(30))
        await until(sdk, batch.id, lambda b: b.request_counts.completed >= 1)
        redis = aioredis.from_url(SHARED_REDIS)  # the window ends now (an hour is the shortest one can ask)
        key = f"{gw.state.services.config.redis.key_prefix}batch:{{acme}}:{batch.id}"
        meta = json.loads(await redis.hget(key, "meta"))
        await redis.hset(key, "meta", json.dumps({**meta, "expires_at": int(time.time()) - 1}))
        await redis.aclose()
        done = await finished(sdk, batch.id)
        errors = await lines_of(sdk, done.error_file_id)
    assert done.status == "expired" and done.expired_at is not None
    assert done.request_counts.completed + done.request_counts.failed == 30
    assert len(errors) == done.request_counts.failed > 0
    assert all(e["error"]["code"] == "batch_expired" and e["response"] is None for e in errors)


async def test_a_line_that_finds_no_worker_waits_and_is_not_failed(fakes, gateway, redis_prefix, tmp_path):
    (fake, url), = await fakes(1)
    fake.fail_status = 503
    doc = batch_config(url, redis_prefix, tmp_path / "usage", retry_after_s=0.05)
    gw = await gateway({**doc, "breaker": {"failure_threshold": 1, "open_s": 0.1}})
    put_off = METRICS.batch_lines.labels("put_off")._value.get()
    async with client(gw.url) as sdk:
        batch = await submit(sdk, jsonl(3))
        await wait_for(lambda: METRICS.batch_lines.labels("put_off")._value.get() >= put_off + 3,
                       what="lines put off")
        assert (await sdk.batches.retrieve(batch.id)).request_counts.failed == 0
        fake.fail_status = None
        done = await finished(sdk, batch.id)
    assert (done.status, done.request_counts.completed, done.request_counts.failed) == ("completed", 3, 0)


async def test_an_embeddings_batch(fakes, gateway, redis_prefix, tmp_path):
    (_, url), = await fakes(1)
    doc = batch_config(url, redis_prefix, tmp_path / "usage")
    gw = await gateway({**doc, "embeddings": [tier("vectors", 1, [url])]})
    lines = b"".join(json.dumps({"custom_id": f"e{i}", "method": "POST", "url": "/v1/embeddings",
                                 "body": {"model": "vectors", "input": ["a", "bb"]}}).encode() + b"\n" for i in range(3))
    async with client(gw.url) as sdk:
        done = await finished(sdk, (await submit(sdk, lines, endpoint="/v1/embeddings")).id)
        out = await lines_of(sdk, done.output_file_id)
    assert done.status == "completed" and sorted(line["custom_id"] for line in out) == ["e0", "e1", "e2"]
    assert all(len(line["response"]["body"]["data"]) == 2 for line in out)
    assert done.usage.input_tokens > 0
