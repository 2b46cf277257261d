"""The gateway owns every id money depends on: a client's x-request-id is echoed (as
x-client-request-id) and logged, never the billing or idempotency key. Replaying one id gets
every request billed; a client cannot take a batch line's settlement id."""
from __future__ import annotations

import asyncio
import glob

import aiohttp

from policies.usage_log import read_records
from tests.gateway.batches.batch_helpers import KEYS, batch_config, client, finished, jsonl, submit, usage_of
from tests.support import wait_for

BODY = {"model": "small", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 3}


async def _billed_requests(gw_url: str) -> int:
    async with client(gw_url) as sdk:
        usage = await usage_of(sdk)
    return sum(t["requests"] for day in usage["days"] for t in day["tiers"].values())


async def _chat(http: aiohttp.ClientSession, url: str, client_id: str) -> aiohttp.ClientResponse:
    async with http.post(url + "/v1/chat/completions", json=BODY,
                         headers={"Authorization": f"Bearer {KEYS['acme']}", "x-request-id": client_id}) as answer:
        await answer.read()
        return answer


async def test_a_replayed_x_request_id_is_billed_every_time(fakes, gateway, redis_prefix, tmp_path, http):
    (fake, url), = await fakes(1)
    gw = await gateway(batch_config(url, redis_prefix, tmp_path / "usage"))
    answers = [await _chat(http, gw.url, "same-id-1") for _ in range(4)]
    assert [a.status for a in answers] == [200] * 4
    server_ids = {a.headers["x-request-id"] for a in answers}
    assert len(server_ids) == 4 and all(i.startswith("req-") for i in server_ids)  # the gateway's own ids
    assert {a.headers["x-client-request-id"] for a in answers} == {"same-id-1"}    # the client's, echoed
    assert {seen["headers"]["x-request-id"] for seen in fake.seen} == server_ids   # workers get ours
    assert await _billed_requests(gw.url) == 4
    records = read_records(glob.glob(str(tmp_path / "usage" / "*.jsonl")))
    assert len(records) == 4 and {r.request_id for r in records} == server_ids
    assert {r.client_request_id for r in records} == {"same-id-1"}


async def test_a_client_cannot_take_a_batch_lines_settlement_id(fakes, gateway, redis_prefix, tmp_path, http):
    (fake, url), = await fakes(1)
    gw = await gateway(batch_config(url, redis_prefix, tmp_path / "usage", lease_s=1))
    fake.delay_s = 0.5  # the batch line waits upstream while the spoofing request is served and settled
    async with client(gw.url) as sdk:
        batch = await submit(sdk, jsonl(1, max_tokens=3))
        await wait_for(lambda: fake.in_flight >= 1, timeout_s=15, what="the batch line upstream")
        fake.delay_s = 0.0
        for spoof in (f"{batch.id}-0", f"{batch.id.removeprefix('batch_')}-0"):
            answer = await _chat(http, gw.url, spoof)
            assert answer.status == 200 and answer.headers["x-request-id"] != spoof
        done = await finished(sdk, batch.id)
    assert done.request_counts.completed == 1
    assert await _billed_requests(gw.url) == 3  # the line and both spoofing requests


async def test_a_client_id_out_of_bounds_is_neither_echoed_nor_used(fakes, gateway, redis_prefix, tmp_path, http):
    (_, url), = await fakes(1)
    gw = await gateway(batch_config(url, redis_prefix, tmp_path / "usage"))
    answers = await asyncio.gather(*(_chat(http, gw.url, bad) for bad in ("x" * 129, "has space")))
    assert all(a.status == 200 and "x-client-request-id" not in a.headers for a in answers)
    async with http.post(gw.url + "/v1/chat/completions", json=BODY,
                         headers={"Authorization": f"Bearer {KEYS['acme']}",
                                  "x-client-request-id": "mine.1"}) as answer:
        assert answer.headers["x-client-request-id"] == "mine.1" and answer.headers["x-request-id"] != "mine.1"
