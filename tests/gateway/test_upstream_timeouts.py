"""Every upstream call has a timeout: against a "black hole" (accepts TCP, reads the request,
never answers) whole and streamed requests, a stalled stream, the health check and the quality
monitor's judge call each end within a few times the configured limit, never hang.

Audit of the gateway's outgoing HTTP calls (all on the one aiohttp session in state.py):
- upstream.open_upstream, session.post (completions, streams, quality re-asks via quality/reask.py):
  ClientTimeout(connect=timeouts.connect_s, sock_read=timeouts.read_s), which also bounds every
  later read of a streamed body in relay.py;
- state._check, session.get /health: ClientTimeout(total=health.timeout_s).
"""
from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest

from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for

READ_S = 1.0
BOUND_S = 10 * READ_S  # generous: a loaded 2-core machine, but far below "hangs"
CLIENT_LIMIT = aiohttp.ClientTimeout(total=3 * BOUND_S)  # a hanging gateway fails the test, not the suite


class BlackHole:
    """Accepts connections and reads each request's first line, then never answers."""

    def __init__(self):
        self.request_lines: list[str] = []
        self._writers = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._swallow, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _swallow(self, reader, writer):
        self._writers.append(writer)
        line = await reader.readline()
        self.request_lines.append(line.decode(errors="replace").strip())
        await reader.read()  # until the gateway gives up and closes

    def saw(self, prefix: str) -> int:
        return sum(line.startswith(prefix) for line in self.request_lines)

    async def close(self):
        for writer in self._writers:
            writer.close()
        self.server.close()


@pytest.fixture
async def black_hole():
    hole = BlackHole()
    url = await hole.start()
    yield hole, url
    await hole.close()


def _config(tiers, prefix, health_interval_s=3600.0, **sections):
    # no health check during the test keeps the black hole "healthy", so requests reach it; the
    # capability card read at startup gives up after the health timeout
    doc = base_config(tiers, prefix, **sections)
    doc["timeouts"] = {"connect_s": 1.0, "read_s": READ_S}
    doc["health"] = {"interval_s": health_interval_s, "timeout_s": 0.5}
    return doc


async def _timed_post(http, url, body):
    started = time.monotonic()
    async with http.post(url, json=body, timeout=CLIENT_LIMIT) as r:
        return r.status, await r.read(), r.headers, time.monotonic() - started


def _assert_openai_5xx(status, raw):
    assert status in (502, 503, 504), (status, raw[:300])
    error = json.loads(raw)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


@pytest.mark.slow  # waits out three read timeouts
async def test_whole_and_streamed_requests_to_a_black_hole_end_with_an_error(black_hole, gateway, redis_prefix,
                                                                             http):
    hole, url = black_hole
    gw = await gateway(_config([tier("only", 1, [url])], redis_prefix))
    chat = {"model": "only", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    for body, path in ((chat, "/v1/chat/completions"), (dict(chat, stream=True), "/v1/chat/completions"),
                       ({"model": "only", "prompt": "hi", "stream": True}, "/v1/completions")):
        status, raw, headers, took = await _timed_post(http, gw.url + path, body)
        error = _assert_openai_5xx(status, raw)
        assert "Timeout" in error["message"] and headers["content-type"].startswith("application/json")
        assert READ_S * 0.8 <= took < BOUND_S, took  # waited for the read timeout, then gave up
    assert hole.saw("POST /v1/chat/completions") == 2 and hole.saw("POST /v1/completions") == 1


async def test_a_stream_that_stalls_midway_is_cut_with_an_error_event(fakes, gateway, redis_prefix, http):
    ((fake, url),) = await fakes(1, chunks=3, chunk_delay_s=60)  # one chunk, then a minute of silence
    gw = await gateway(_config([tier("only", 1, [url])], redis_prefix))
    started = time.monotonic()
    async with http.post(gw.url + "/v1/chat/completions", json={
            "model": "only", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
            timeout=CLIENT_LIMIT) as r:
        assert r.status == 200
        text = (await r.read()).decode()
    assert time.monotonic() - started < BOUND_S
    assert '"content":"w0 "' in text and "upstream failed mid-stream" in text and text.endswith("data: [DONE]\n\n")


async def test_health_check_marks_a_black_hole_down_within_its_timeout(black_hole, gateway, redis_prefix, http):
    hole, url = black_hole
    gw = await gateway(_config([tier("only", 1, [url])], redis_prefix, health_interval_s=0.2))
    async def marked_down() -> bool:
        async with http.get(gw.url + "/health") as r:
            return not (await r.json())["backends"][url]["healthy"]

    await wait_for(marked_down, BOUND_S, what="the black hole marked down")
    assert hole.saw("GET /health") >= 1
    status, raw, _, took = await _timed_post(http, gw.url + "/v1/completions", {"model": "only", "prompt": "x"})
    assert _assert_openai_5xx(status, raw)["code"] == "upstream_unavailable" and took < READ_S  # not even tried


async def test_quality_judge_call_to_a_black_hole_times_out(black_hole, fakes, gateway, redis_prefix, http):
    hole, top_url = black_hole
    ((small, small_url),) = await fakes(1)
    doc = _config([tier("small", 1, [small_url]), tier("top", 4, [top_url])], redis_prefix,
                  quality={"sampling_rate": 1.0, "refresh_s": 0.2})
    gw = await gateway(doc)
    status, raw, _, _ = await _timed_post(http, gw.url + "/v1/chat/completions", {
        "model": "small", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})
    assert status == 200  # the client is answered at once; the judge call runs in the background
    monitor = gw.state.quality
    await wait_for(lambda: monitor.counts["error"] > 0, BOUND_S, what="the judge call timed out")
    assert monitor.counts == dict(monitor.counts, sampled=1, error=1, passed=0, failed=0)
    assert hole.saw("POST /v1/chat/completions") == 1  # the re-ask reached the top tier and was abandoned
