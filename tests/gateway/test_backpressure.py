"""A worker's full queue (503 "overloaded" with Retry-After) is backpressure, not a fault: the
next worker of the tier is tried, no breaker counts it, and when every worker is full the
client is told to retry after the worker's Retry-After."""
from __future__ import annotations

import asyncio

import openai
import pytest

from tests.gateway.gw_helpers import base_config, tier

HI = [{"role": "user", "content": "hi"}]


async def test_a_full_queue_never_opens_a_breaker_and_the_client_is_told_to_retry(fakes, gateway, redis_prefix):
    (busy, busy_url), (spare, spare_url), (large, large_url) = await fakes(3)
    busy.overloaded = True
    gw = await gateway(base_config([tier("t", 1, [busy_url, spare_url]), tier("large", 2, [large_url])],
                                   redis_prefix, breaker={"failure_threshold": 2, "open_s": 30}))
    backend = gw.state.pools.backends[busy_url]
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0, timeout=10) as client:
        for _ in range(6):  # the spare worker takes what the full one turns away
            raw = await client.chat.completions.with_raw_response.create(model="t", messages=HI)
            assert raw.headers["x-tiergate-tier"] == "t"
        assert len(busy.seen) >= 2 and spare.served == 6
        spare.overloaded = True
        for _ in range(3):  # the whole tier is full: retry later, and no climb to the tier above
            with pytest.raises(openai.APIStatusError) as err:
                await client.chat.completions.create(model="t", messages=HI)
            assert err.value.status_code == 503 and err.value.body["code"] == "overloaded", err.value.body
            assert err.value.response.headers["Retry-After"] == "1" and "'t' is overloaded" in err.value.body["message"]
        assert backend.failures == 0 and backend.breaker_state(asyncio.get_running_loop().time()) == "closed"
        busy.overloaded = spare.overloaded = False
        for _ in range(4):  # once it has room, the worker that was full is asked again
            await client.chat.completions.create(model="t", messages=HI)
    assert busy.served >= 1 and large.served == 0
