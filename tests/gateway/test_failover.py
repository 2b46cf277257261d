"""Failover over real sockets and time: the breaker opening and its half-open probe, health
checks, a worker that hangs past the read timeout, cut streams, client disconnects. The failover
loop's own logic is tested in process: test_upstream.py."""
from __future__ import annotations

import asyncio

import openai
import pytest

from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for


def _client(gw) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0, timeout=10)


HI = [{"role": "user", "content": "hi"}]


async def test_breaker_opens_after_consecutive_failures_then_half_open_probe_closes_it(
        fakes, gateway, redis_prefix):
    (flaky, flaky_url), (good, good_url) = await fakes(2)
    flaky.fail_status = 500
    gw = await gateway(base_config([tier("t", 1, [flaky_url, good_url])], redis_prefix,
                                   breaker={"failure_threshold": 2, "open_s": 0.6}))
    backend = gw.state.services.upstreams.pools.backends[flaky_url]
    async with _client(gw) as client:
        for _ in range(6):
            await client.chat.completions.create(model="t", messages=HI)
        assert len(flaky.seen) == 2 and backend.breaker_state(asyncio.get_running_loop().time()) != "closed"
        flaky.fail_status = None
        loop = asyncio.get_running_loop()  # after open_s the breaker lets one probe through
        await wait_for(lambda: backend.breaker_state(loop.time()) == "half-open", timeout_s=5)
        for _ in range(6):
            await client.chat.completions.create(model="t", messages=HI)
    assert flaky.served >= 2 and backend.failures == 0 and backend.open_until == 0.0


async def test_active_health_check_takes_worker_out_and_back(fakes, gateway, redis_prefix):
    (sick, sick_url), (good, good_url) = await fakes(2)
    gw = await gateway(base_config([tier("t", 1, [sick_url, good_url])], redis_prefix))
    sick.healthy = False
    sick_backend = gw.state.services.upstreams.pools.backends[sick_url]
    await wait_for(lambda: not sick_backend.healthy, timeout_s=5)  # the next health round
    async with _client(gw) as client:
        for _ in range(4):
            await client.chat.completions.create(model="t", messages=HI)
        assert sick.served == 0
        sick.healthy = True
        await wait_for(lambda: sick_backend.healthy, timeout_s=5)
        for _ in range(4):
            await client.chat.completions.create(model="t", messages=HI)
    assert sick.served > 0


async def test_hanging_worker_times_out_and_request_moves_on(fakes, gateway, redis_prefix):
    (stuck, stuck_url), (good, good_url) = await fakes(2)
    stuck.hang = True
    doc = base_config([tier("t", 1, [stuck_url, good_url])], redis_prefix)
    doc["timeouts"]["read_s"] = 0.3
    gw = await gateway(doc)
    async with _client(gw) as client:
        for _ in range(2):
            answer = await client.chat.completions.create(model="t", messages=HI)
            assert answer.choices[0].message.content
    assert good.served == 2


async def test_stream_cut_midway_ends_with_openai_error_event(fakes, gateway, redis_prefix, http):
    (fake, url), = await fakes(1, chunks=6)
    fake.cut_after = 2
    gw = await gateway(base_config([tier("t", 1, [url])], redis_prefix))
    payload = {"model": "t", "messages": HI, "stream": True}
    async with http.post(gw.url + "/v1/chat/completions", json=payload) as response:
        assert response.status == 200
        raw = await asyncio.wait_for(response.read(), 5)
    events = [e for e in raw.split(b"\n\n") if e]
    assert len(events) == 4 and b'"error"' in events[2] and events[3] == b"data: [DONE]"
    async with _client(gw) as client:
        stream = await client.chat.completions.create(model="t", messages=HI, stream=True)
        got = []
        with pytest.raises(openai.APIError, match="mid-stream"):
            async for chunk in stream:
                got.append(chunk.choices[0].delta.content)
    assert got == ["w0 ", "w1 "]


async def test_client_disconnect_cancels_upstream_request(fakes, gateway, redis_prefix, http):
    (fake, url), = await fakes(1, chunks=50, chunk_delay_s=0.05)
    gw = await gateway(base_config([tier("t", 1, [url])], redis_prefix))
    payload = {"model": "t", "messages": HI, "stream": True}
    async with http.post(gw.url + "/v1/chat/completions", json=payload) as response:
        await response.content.readany()
    fake.delay_s = 5  # non-streamed: the client gives up while the upstream is still working
    with pytest.raises(asyncio.TimeoutError):
        async with http.post(gw.url + "/v1/chat/completions", json={"model": "t", "messages": HI},
                             timeout=__import__("aiohttp").ClientTimeout(total=0.3)) as response:
            await response.read()
    await wait_for(lambda: fake.disconnects == 2 and fake.in_flight == 0, timeout_s=5)
    assert gw.state.services.upstreams.pools.backends[url].outstanding == 0
