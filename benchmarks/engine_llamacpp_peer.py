"""llama.cpp as the main peer of `benchmarks.engine`: `llama-server` on the same model's GGUF
(SmolLM2 Q4_1), fed the same token-id prompts on the same arrival schedule over streamed
`/v1/completions`; one timestamp per streamed token."""
from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

import aiohttp

from backends.engine.model.models import BUNDLED
from benchmarks.llamacpp_build import start_llama_server


async def _request(session, url: str, prompt: list[int], max_tokens: int, at: float, times: list[float],
                   deadline: float) -> None:
    await asyncio.sleep(max(0.0, at - time.perf_counter()))
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True}
    async with session.post(f"{url}/v1/completions", json=body) as response:
        response.raise_for_status()
        async for raw in response.content:
            line = raw.decode().strip()
            if line.startswith("data:") and line != "data: [DONE]" and json.loads(line[5:]).get("choices"):
                times.append(time.perf_counter())
            if time.perf_counter() > deadline:
                return


async def _replay(url, prompts, out_lens, arrivals, limit_s):
    times: list[list[float]] = [[] for _ in prompts]
    # a fresh connection per request: llama-server closes idle keep-alive connections, and a
    # request sent on one the pool still held failed with ServerDisconnectedError
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=limit_s + 60),
                                     connector=aiohttp.TCPConnector(force_close=True)) as session:
        await _request(session, url, prompts[0][:32], 4, 0.0, [], float("inf"))  # warm-up, not timed
        start = time.perf_counter()
        deadline = start + limit_s
        tasks = [_request(session, url, p, n, start + a, t, deadline)
                 for p, n, a, t in zip(prompts, out_lens, arrivals, times)]
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=limit_s + 30)
    cut = any(len(t) < n for t, n in zip(times, out_lens))
    return start, times, (deadline if cut else None)


def run_llamacpp(model: str, prompts, out_lens, arrivals, log, limit_s: float):
    with tempfile.TemporaryDirectory() as scratch:
        gguf = BUNDLED[model].locate_gguf(Path(scratch))
        proc, url = start_llama_server(gguf, Path(scratch) / "llama-server.log")
        log(f"llama.cpp: llama-server up at {url}")
        try:
            return asyncio.run(_replay(url, prompts, out_lens, arrivals, limit_s))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
