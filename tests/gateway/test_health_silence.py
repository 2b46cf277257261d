"""A worker whose /health goes silent (no answer within health.timeout_s) while it answers
requests is busy, not gone: it stays in rotation, so requests already admitted against a tenant's
limits are not refused for want of a worker (the Cluster rate-limit test lost 1 to 6 of 40 that way
on a loaded machine: the in-process fake's /health timed out under a burst). With no request
answered, silence takes it out after health.silent_checks checks in a row; a status other than 200
takes it out at once."""
from __future__ import annotations

import asyncio
import time

from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for

CHAT = {"model": "small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def _backend(gw, url: str):
    return gw.state.services.upstreams.pools.backends[url]


async def test_a_worker_answering_requests_stays_in_rotation_while_its_health_check_is_silent(
        fakes, gateway, http, redis_prefix):
    (fake, url), = await fakes(1)
    gw = await gateway(base_config([tier("small", 1, [url])], redis_prefix))
    fake.health_delay_s = 5.0  # far past health.timeout_s (0.5 s): every check times out
    checks_before, until = len(fake.health_headers), time.monotonic() + 3.0  # ~5 health rounds of 0.2 s + 0.5 s
    statuses, seen_healthy = [], []
    while time.monotonic() < until:
        async with http.post(gw.url + "/v1/chat/completions", json=CHAT) as answer:
            statuses.append(answer.status)
        seen_healthy.append(_backend(gw, url).healthy)
        await asyncio.sleep(0.05)
    assert len(fake.health_headers) - checks_before >= 3  # the checks did run, and went unanswered
    assert set(statuses) == {200} and all(seen_healthy)


async def test_a_silent_worker_without_traffic_leaves_after_silent_checks_and_a_down_one_at_once(
        fakes, gateway, redis_prefix):
    (slow, slow_url), (down, down_url) = await fakes(2)
    gw = await gateway(base_config([tier("small", 1, [slow_url]), tier("large", 2, [down_url])], redis_prefix))
    slow.health_delay_s, down.healthy = 5.0, False
    await wait_for(lambda: not _backend(gw, down_url).healthy, timeout_s=5, what="the down worker out")
    await wait_for(lambda: not _backend(gw, slow_url).healthy, timeout_s=10, what="the silent worker out")
    slow.health_delay_s = 0.0
    await wait_for(lambda: _backend(gw, slow_url).healthy, timeout_s=10, what="the silent worker back on an answer")
