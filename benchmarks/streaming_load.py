"""One streaming `/v1/completions` client and the workloads it drives, shared by every server
a benchmark compares: closed loop at a fixed concurrency, each request timed from send to
first token (TTFT) and between tokens (ITL)."""
from __future__ import annotations

import asyncio
import json
import random
import time

import aiohttp

from measure.stats import latency_stats

# Original filler words for synthetic prompts (no dataset text): ~1.3 tokens per word.
_WORDS = ("river stone lantern orbit copper meadow signal harbor quiet violet engine thunder garden "
          "ledger marble falcon winter candle bridge pocket silver ocean compass timber velvet mirror").split()


def synthetic_prompts(count: int, low_tokens: int, high_tokens: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(int(rng.randint(low_tokens, high_tokens) / 1.3)))
            for _ in range(count)]


async def _one(session, url: str, model: str, prompt: str, max_tokens: int) -> dict:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True}
    started = time.perf_counter()
    stamps: list[float] = []
    async with session.post(f"{url}/v1/completions", json=body) as response:
        if response.status != 200:
            return {"error": f"{response.status}: {(await response.text())[:200]}"}
        async for raw in response.content:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            choices = json.loads(line[5:]).get("choices") or [{}]
            if choices[0].get("text"):
                stamps.append(time.perf_counter())
    if not stamps:
        return {"error": "no tokens streamed"}
    return {"ttft": stamps[0] - started, "itl": [b - a for a, b in zip(stamps, stamps[1:])], "tokens": max_tokens}


async def run_closed_loop(url: str, model: str, jobs: list[tuple[str, int]], concurrency: int) -> dict:
    """Send (prompt, max_tokens) jobs with `concurrency` in flight; summary of the run."""
    queue = list(jobs)
    results: list[dict] = []
    timeout = aiohttp.ClientTimeout(total=3600)
    # a new connection per request: llama-server closes a kept-alive connection after a stream,
    # and a write on it then fails; every server is measured the same way
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(force_close=True)) as session:
        async def lane():
            while queue:
                prompt, max_tokens = queue.pop(0)
                results.append(await _one(session, url, model, prompt, max_tokens))
        started = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    ok = [r for r in results if "error" not in r]
    errors = [r["error"] for r in results if "error" in r]
    ttft = latency_stats([r["ttft"] for r in ok])
    itl = latency_stats([gap for r in ok for gap in r["itl"]])
    return {"requests": len(jobs), "errors": len(errors), "first_error": errors[0] if errors else None,
            "tokens_per_s": round(sum(r["tokens"] for r in ok) / elapsed, 2),
            "ttft_p50_s": ttft["p50"], "ttft_p99_s": ttft["p99"], "itl_p50_s": itl["p50"], "itl_p99_s": itl["p99"]}
