"""The two kinds of traffic the priority benchmarks mix, over streamed chat completions:
interactive requests at a steady open-loop rate (timed to their first token), and batch
requests kept at a fixed concurrency (their tokens counted as they stream)."""
from __future__ import annotations

import asyncio
import itertools
import json
import time

import aiohttp

from benchmarks.chat_prompts import CHAT_PROMPTS
from measure.stats import latency_stats

BATCH_HEADERS = {"x-tiergate-priority": "batch"}
TIMEOUT = aiohttp.ClientTimeout(total=600)


def add_traffic_args(parser) -> None:
    """The traffic flags both priority benchmarks share."""
    parser.add_argument("--rate", type=float, default=1.0, help="interactive requests per second")
    parser.add_argument("--max-tokens", type=int, default=32, help="interactive max_tokens")
    parser.add_argument("--batch-max-tokens", type=int, default=32, help="max_tokens of each batch request")


_serial = itertools.count()  # numbers every request: prompts share only the system prompt's KV


def chat_body(model: str, index: int, max_tokens: int, stream: bool) -> dict:
    """The index-th question of the fixed set, numbered (as real requests differ, no prefix-cache
    hit past the system prompt); greedy."""
    content = f"[{next(_serial)}] {CHAT_PROMPTS[index % len(CHAT_PROMPTS)]}"
    body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "temperature": 0}
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    return body


async def stream_chat(session: aiohttp.ClientSession, url: str, body: dict, headers: dict,
                      stamps: list[float] | None = None) -> dict:
    """One streamed request: status, time to first token, completion tokens. `stamps` gets
    the arrival time of every content chunk (a token, or a few when they end mid-character)."""
    started = time.perf_counter()
    out: dict = {"t": started, "tokens": 0}
    try:
        async with session.post(f"{url}/v1/chat/completions", json=body, headers=headers) as response:
            out["status"] = response.status
            if response.status != 200:
                out["error"] = (await response.text())[:200]
                return out
            async for line in response.content:
                if not line.startswith(b"data: {"):
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    out["status"], out["error"] = "stream_error", str(event["error"])[:200]
                choices = event.get("choices") or []
                if choices and "ttft" not in out:
                    out["ttft"] = time.perf_counter() - started
                if choices and choices[0].get("delta", {}).get("content") and stamps is not None:
                    stamps.append(time.perf_counter())
                out["tokens"] = (event.get("usage") or {}).get("completion_tokens", out["tokens"])
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        out["status"], out["error"] = type(exc).__name__, str(exc)[:200]
    out["e2e"] = time.perf_counter() - started
    return out


async def interactive_load(url: str, model: str, rate: float, count: int, max_tokens: int,
                           headers: dict | None = None, max_in_flight: int = 64,
                           stop: asyncio.Event | None = None) -> list[dict]:
    """Up to `count` streamed requests, one every 1/rate seconds whatever the latency (open
    loop), fewer if `stop` is set first; an arrival that finds `max_in_flight` still running
    is shed and counted as an error."""
    results: list[dict] = []
    tasks: set[asyncio.Task] = set()
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        start = time.perf_counter()
        for i in range(count):
            await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
            if stop is not None and stop.is_set():
                break
            if len(tasks) >= max_in_flight:
                results.append({"status": "shed_by_client"})
                continue
            task = asyncio.create_task(stream_chat(session, url, chat_body(model, i, max_tokens, True), headers or {}))
            tasks.add(task)
            task.add_done_callback(lambda t: (tasks.discard(t), results.append(t.result())))
        if tasks:
            await asyncio.wait(set(tasks))
    return results


def ttft_summary(results: list[dict]) -> dict:
    ok = [r for r in results if r.get("status") == 200]
    stats = latency_stats([r["ttft"] for r in ok if "ttft" in r])
    return {"requests": len(results), "ok": len(ok), "errors": len(results) - len(ok),
            "ttft_p50_s": stats["p50"], "ttft_p99_s": stats["p99"]}


class BatchLanes:
    """`concurrency` lanes that each send batch-priority requests one after another, from a
    bounded job list (`jobs` requests) or without end until stop(); every content chunk's
    arrival is stamped so throughput can be read over any window."""

    def __init__(self, urls: list[str], model: str, concurrency: int, max_tokens: int, jobs: int | None = None,
                 headers: dict | None = None, progress_every: int = 0):
        self.urls, self.model, self.max_tokens = urls, model, max_tokens
        self.jobs, self.progress_every = jobs, progress_every
        self.concurrency = concurrency
        self.headers = BATCH_HEADERS if headers is None else headers
        self.indices = iter(range(jobs)) if jobs is not None else itertools.count()
        self.results: list[dict] = []
        self.stamps: list[float] = []
        self._stopping = False
        self._task: asyncio.Task | None = None

    async def _lane(self, session, lane: int) -> None:
        url = self.urls[lane % len(self.urls)]  # lanes spread over the tier's workers
        for index in self.indices:
            if self._stopping:
                return
            body = chat_body(self.model, index, self.max_tokens, True)
            self.results.append(await stream_chat(session, url, body, self.headers, self.stamps))
            if self.progress_every and len(self.results) % self.progress_every == 0:
                print(f"batch: {len(self.results)}/{self.jobs or '-'} requests answered", flush=True)

    async def _run(self) -> None:
        connector = aiohttp.TCPConnector(limit=self.concurrency)
        async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
            await asyncio.gather(*(self._lane(session, lane) for lane in range(self.concurrency)))

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def wait(self) -> None:
        await self._task

    async def stop(self) -> None:
        """Stop after the requests in flight (no new ones), so no stream is cut."""
        self._stopping = True
        await self._task

    def tokens_per_s(self, start: float, end: float) -> float:
        return round(sum(start <= s < end for s in self.stamps) / max(end - start, 1e-9), 2)

    def errors(self) -> int:
        return sum(r.get("status") != 200 for r in self.results)
