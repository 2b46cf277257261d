"""One request at a time against a gateway or an upstream, timed: what benchmarks.gateway and
benchmarks.redis_modes both measure with."""
from __future__ import annotations

import asyncio
import time

import aiohttp

BODY = {"model": "auto", "max_tokens": 8,
        "messages": [{"role": "user", "content": "What is the capital of France? Answer in one word."}]}


async def wait_http(session: aiohttp.ClientSession, url: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            async with session.get(url) as response:
                if response.status < 500:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


async def one_call(session, url: str, body: dict, headers: dict, stream: bool) -> float:
    """Seconds to the whole answer, or to the first content chunk of a stream."""
    started = time.perf_counter()
    async with session.post(url, json=dict(body, stream=stream), headers=headers) as response:
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}: {(await response.text())[:200]}")
        if not stream:
            await response.read()
            return time.perf_counter() - started
        async for line in response.content:
            if line.startswith(b"data: {"):
                elapsed = time.perf_counter() - started
                await response.read()
                return elapsed
    raise RuntimeError("stream ended before any chunk")
