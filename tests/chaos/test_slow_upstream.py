"""Latency injection: upstreams slower than timeouts.read_s. Clients get a timely answer from
another worker, or a timely OpenAI error; never a hang, and the gateway holds nothing afterwards."""
from __future__ import annotations

import asyncio
import time

from measure.scale import chaos_scale
from tests.chaos.chaos_helpers import READ_S, config, idle, sse_events
from tests.support import wait_for


def body(i: int, stream: bool = False) -> dict:
    return {"model": "small", "messages": [{"role": "user", "content": f"slow {i}"}], "stream": stream}


async def test_slow_worker_is_failed_over_in_time(fakes, gateway, http, redis_prefix):
    (slow, slow_url), (fast, fast_url) = await fakes(2)
    slow.delay_s = 30
    gw = await gateway(config([slow_url, fast_url], redis_prefix))

    async def one(i):
        started = time.monotonic()
        async with http.post(f"{gw.url}/v1/chat/completions", json=body(i)) as r:
            return r.status, await r.json(), time.monotonic() - started

    n = 12 * chaos_scale()  # more in the long run (python -m benchmarks.chaos)
    answers = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(n))), 10 * chaos_scale())
    assert [s for s, _, _ in answers] == [200] * n
    assert max(t for _, _, t in answers) < READ_S + 2.0
    assert fast.served == n and slow.served == 0
    assert len(slow.seen) > 0  # some requests really went to the slow worker first
    assert idle(gw)


async def test_all_workers_slow_gives_a_timely_openai_error(fakes, gateway, http, redis_prefix):
    fakes_ = await fakes(2)
    for fake, _ in fakes_:
        fake.delay_s = 30
    gw = await gateway(config([u for _, u in fakes_], redis_prefix))
    started = time.monotonic()
    async with http.post(f"{gw.url}/v1/chat/completions", json=body(0)) as r:
        status, answer = r.status, await r.json()
    assert time.monotonic() - started < 2 * READ_S + 2.0
    assert status in (502, 503, 504), (status, answer)
    assert set(answer["error"]) == {"message", "type", "param", "code"}
    await wait_for(lambda: idle(gw), timeout_s=5)
    async with http.get(f"{gw.url}/health") as r:  # answers at once, whatever it says about the workers
        assert r.status == 200 and (await r.json())["status"] == "ok"


async def test_stream_that_stalls_mid_way_ends_with_an_error_event(fakes, gateway, http, redis_prefix):
    [(stalling, url)] = await fakes(1, chunks=4, chunk_delay_s=5.0)  # first chunk, then silence > read_s
    gw = await gateway(config([url], redis_prefix))
    started = time.monotonic()
    async with http.post(f"{gw.url}/v1/chat/completions", json=body(0, stream=True)) as r:
        assert r.status == 200
        raw = await asyncio.wait_for(r.read(), READ_S + 3.0)
    assert time.monotonic() - started < READ_S + 3.0
    events = sse_events(raw)
    assert events[0]["choices"][0]["delta"]["content"] == "w0 "
    assert "error" in events[-1], events[-1]
    await wait_for(lambda: idle(gw), timeout_s=5)

