"""Admission on every endpoint: /v1/route, /v1/files, /v1/batches and /v1/usage count against
the tenant's requests_per_minute like a generation, and the active-batch cap is checked before
a batch's input file is read. Workers are played by the scripted transport."""
from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import aiohttp
import pytest

from policies.keys import hash_key
from tests.gateway.batches.batch_helpers import batch_config, jsonl
from tests.support.scripted_transport import ScriptedTransport, worker

LIMITED, FREE = "sk-admission-limited", "sk-admission-free"
CHAT = {"model": "small", "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture
async def admission_gw(gateway, redis_prefix, tmp_path):
    """The gateway's URL; its worker holds every generation until the test ends (a batch stays active)."""
    release = asyncio.Event()

    def script(sent):
        reply = worker(sent)
        return replace(reply, hold=release) if sent.url.endswith("/v1/chat/completions") else reply
    doc = batch_config("http://worker.test", redis_prefix, tmp_path / "usage", max_active_per_tenant=1)
    doc["tenants"] = {"limited": {"keys": [{"id": "k", "sha256": hash_key(LIMITED)}],
                                  "rate_limits": {"requests_per_minute": 2}},
                      "free": {"keys": [{"id": "k", "sha256": hash_key(FREE)}]}}
    yield (await gateway(doc, transport=ScriptedTransport(script))).url
    release.set()


async def _call(http: aiohttp.ClientSession, url: str, key: str, method: str, path: str, **kw) -> tuple[int, dict]:
    async with http.request(method, url + path, headers={"Authorization": f"Bearer {key}"}, **kw) as response:
        return response.status, await response.json(content_type=None)


@pytest.mark.parametrize("method,path", [("POST", "/v1/route"), ("GET", "/v1/files"), ("GET", "/v1/batches"),
                                         ("GET", "/v1/usage"), ("GET", "/v1/files/file-nope")])
async def test_each_endpoint_counts_against_requests_per_minute(admission_gw, method, path):
    body = {"json": CHAT} if method == "POST" else {}
    async with aiohttp.ClientSession() as http:
        first = [(await _call(http, admission_gw, LIMITED, method, path, **body))[0] for _ in range(2)]
        status, answer = await _call(http, admission_gw, LIMITED, method, path, **body)
        other = await _call(http, admission_gw, FREE, method, path, **body)
    assert 429 not in first
    assert status == 429 and "requests_per_minute" in answer["error"]["message"]
    assert other[0] != 429  # the other tenant's window is its own


async def _upload(http: aiohttp.ClientSession, url: str, content: bytes) -> str:
    form = aiohttp.FormData()
    form.add_field("purpose", "batch")
    form.add_field("file", content, filename="in.jsonl")
    status, meta = await _call(http, url, FREE, "POST", "/v1/files", data=form)
    assert status == 200, meta
    return meta["id"]


async def test_the_active_batch_cap_is_checked_before_the_input_is_read(admission_gw):
    batch = {"endpoint": "/v1/chat/completions", "completion_window": "24h"}
    async with aiohttp.ClientSession() as http:
        running = await _upload(http, admission_gw, jsonl(1))
        status, created = await _call(http, admission_gw, FREE, "POST", "/v1/batches",
                                      json={**batch, "input_file_id": running})
        assert status == 200, created
        # an input whose lines name another endpoint: reading it would answer 400
        other = await _upload(http, admission_gw, jsonl(1, url="/v1/embeddings", model="small"))
        status, refused = await _call(http, admission_gw, FREE, "POST", "/v1/batches",
                                      json={**batch, "input_file_id": other})
    assert status == 429 and refused["error"]["code"] == "too_many_batches", json.dumps(refused)
