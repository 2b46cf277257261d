"""A client that leaves early is billed exactly what the worker generated: a stream cut mid-way
and a whole answer cancelled while generating are settled with the worker's own count (prompt
and completion), asked of the worker after the gateway stopped it. The session's real worker
behind an in-process gateway with tenants, on the shared Redis."""
from __future__ import annotations

import asyncio
import glob
import json

import aiohttp
import pytest

from policies.keys import hash_key
from policies.usage_log import read_records
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for
from tests.support.metrics import metric, scrape

MODEL = "smollm2-135m"
KEY = "sk-worker-usage-key"
LONG = [{"role": "user", "content": "Count from 1 to 500, one number per line."}]


@pytest.fixture
def worker(shared_worker):
    """The session's worker: these tests only send it requests and cancel their own."""
    return shared_worker


@pytest.fixture
async def billed(worker, gateway, redis_prefix, tmp_path):
    """A gateway with one tenant in front of the worker; returns it and its usage-log reader."""
    tenants = {"acme": {"keys": [{"id": "k", "sha256": hash_key(KEY)}]}}
    doc = base_config([tier("small", 1, [worker], model=MODEL)], redis_prefix, tenants=tenants,
                      policy={"usage_log": {"dir": str(tmp_path / "usage"), "fsync": "always"}},
                      timeouts={"connect_s": 1.0, "read_s": 60.0})
    gw = await gateway(doc)
    return gw, lambda: read_records(sorted(glob.glob(str(tmp_path / "usage" / "*"))))


async def _worker_count(http: aiohttp.ClientSession, worker: str, request_id: str) -> dict:
    async with http.post(f"{worker}/v1/internal/requests/{request_id}/abort?wait_s=2") as answer:
        assert answer.status == 200, await answer.text()
        body = await answer.json()
    assert body["finished"] is True
    return body["usage"]


async def _prompt_tokens(http: aiohttp.ClientSession, worker: str, body: dict) -> int:
    """What the worker counts for this prompt, asked directly with a one-token answer."""
    async with http.post(f"{worker}/v1/{'chat/' if 'messages' in body else ''}completions",
                         json={**body, "model": MODEL, "max_tokens": 1, "stream": False}) as answer:
        return (await answer.json())["usage"]["prompt_tokens"]


async def _ttft_count(worker: str) -> float:
    page = await asyncio.to_thread(scrape, worker)
    return metric(page, "tiergate_worker_time_to_first_token_seconds_count", default=0.0)


async def test_a_stream_cut_by_the_client_is_billed_the_workers_count(billed, worker, http):
    gw, records = billed
    body = {"model": "small", "messages": LONG, "max_tokens": 300, "temperature": 0, "stream": True}
    received = 0
    async with http.post(gw.url + "/v1/chat/completions", json=body,
                         headers={"Authorization": f"Bearer {KEY}"}) as answer:
        assert answer.status == 200
        async for line in answer.content:
            if line.startswith(b"data: {") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                received += 1
                if received == 5:
                    break
        answer.close()  # the client leaves mid-stream
    [record] = await wait_for(records, timeout_s=20, what="the cut stream's usage record")
    counted = await _worker_count(http, worker, record.request_id)
    assert (record.prompt_tokens, record.completion_tokens) == (counted["prompt_tokens"],
                                                                counted["completion_tokens"])
    assert record.prompt_tokens == await _prompt_tokens(http, worker, body)
    assert record.completion_tokens >= received and record.usage_source == "worker"


async def test_a_whole_answer_cancelled_while_generating_is_billed_the_workers_count(billed, worker, http):
    gw, records = billed
    body = {"model": "small", "prompt": "1, 2, 3, 4, 5,", "max_tokens": 400, "temperature": 0}
    first_tokens = await _ttft_count(worker)

    async def ask():
        async with http.post(gw.url + "/v1/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}) as r:
            return await r.read()

    client = asyncio.create_task(ask())
    await wait_for(lambda: _first_token_after(worker, first_tokens), timeout_s=30, what="the worker generating")
    client.cancel()  # the client gives up before the answer
    [record] = await wait_for(records, timeout_s=20, what="the cancelled request's usage record")
    counted = await _worker_count(http, worker, record.request_id)
    assert (record.prompt_tokens, record.completion_tokens) == (counted["prompt_tokens"],
                                                                counted["completion_tokens"])
    assert record.prompt_tokens == await _prompt_tokens(http, worker, body)
    assert 1 <= record.completion_tokens < 400 and record.usage_source == "worker"


async def _first_token_after(worker: str, before: float) -> bool:
    return await _ttft_count(worker) > before


async def test_an_id_the_worker_never_saw_is_404(worker, http):
    async with http.post(f"{worker}/v1/internal/requests/req-never-sent/abort?wait_s=0") as answer:
        assert answer.status == 404
        assert (await answer.json())["error"]["param"] == "request_id"
    async with http.post(f"{worker}/v1/internal/requests/req-x/abort?wait_s=99") as answer:
        assert answer.status == 400 and (await answer.json())["error"]["param"] == "wait_s"
