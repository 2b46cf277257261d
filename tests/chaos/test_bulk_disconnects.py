"""Many clients hang up mid-stream at once: the gateway cancels every upstream generation,
holds no request afterwards, and keeps serving."""
from __future__ import annotations

import asyncio

import aiohttp

from measure.scale import chaos_scale
from tests.chaos.chaos_helpers import config, idle
from tests.support import wait_for

CLIENTS = 30 * chaos_scale()  # more in the long run (python -m benchmarks.chaos)


async def test_thirty_streams_cut_after_the_first_chunk(fakes, gateway, http, redis_prefix):
    started = await fakes(2, chunks=50, chunk_delay_s=0.1)  # 5 s per full answer
    # roomy timeouts: the test is about hanging up, and 30 streams opened at once on a loaded machine
    # can wait longer than the chaos tests' short timeouts for a connection or a first chunk
    gw = await gateway(config([u for _, u in started], redis_prefix, timeouts={"connect_s": 5.0, "read_s": 5.0}))
    body = {"model": "small", "messages": [{"role": "user", "content": "stream please"}], "stream": True}

    async def hang_up_after_first_chunk():
        async with aiohttp.ClientSession() as own:  # its own connection, closed for real
            async with own.post(f"{gw.url}/v1/chat/completions", json=body) as r:
                assert r.status == 200, await r.text()
                first = await r.content.readuntil(b"\n\n")
                assert first.startswith(b"data: ")
                r.connection.transport.close()

    await asyncio.wait_for(asyncio.gather(*(hang_up_after_first_chunk() for _ in range(CLIENTS))),
                           15 * chaos_scale())
    fakes_ = [f for f, _ in started]
    await wait_for(lambda: sum(f.disconnects for f in fakes_) >= CLIENTS and idle(gw), 5,
                   what="every upstream generation cancelled and the gateway idle")
    assert sum(f.disconnects for f in fakes_) == CLIENTS   # every upstream generation was cancelled
    assert sum(f.in_flight for f in fakes_) == 0
    assert idle(gw)                                        # the gateway holds no request
    assert sum(f.served for f in fakes_) == CLIENTS        # none was retried behind the client's back
    async with http.get(f"{gw.url}/health") as r:
        assert r.status == 200
    for f in fakes_:
        f.chunk_delay_s = 0
    async with http.post(f"{gw.url}/v1/chat/completions", json={**body, "stream": False}) as r:
        assert r.status == 200 and (await r.json())["choices"][0]["message"]["content"]
    async with http.get(f"{gw.url}/metrics") as r:
        text = await r.text()
    assert r.status == 200 and "tiergate_requests_total" in text
