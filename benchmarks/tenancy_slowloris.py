"""Slow connections held open by one client (slowloris) against everyone else's latency (issue 56, part 2).

A gateway (python -m gateway --workers 1, on the shared Redis under a prefix of its own) in front of a fake upstream serves
REQUESTS chat requests from well-behaved clients (CONCURRENCY at a time) twice: on a quiet
gateway, and while one client holds SLOW connections open, each sending its request headers a
byte every DRIP_S and never finishing them. Reported: each run's p50 and p99 latency, their
ratio, and how many slow connections the gateway closed by itself within HOLD_S (its
`limits.header_read_timeout_s` is HEADER_TIMEOUT_S here). `python -m benchmarks.tenancy_slowloris`
prints one JSON line.
"""
from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import yaml

from launcher.fake_upstream import start_fake
from launcher.processes import SHARED_REDIS, delete_prefix, free_port

REQUESTS = 1000
CONCURRENCY = 8
SLOW = 200
DRIP_S = 1.0
HEADER_TIMEOUT_S = 5.0
HOLD_S = 3 * HEADER_TIMEOUT_S
BODY = {"model": "small", "messages": [{"role": "user", "content": "Name one prime number."}], "max_tokens": 4}


def _config(url: str, prefix: str) -> dict:
    return {"redis": {"url": SHARED_REDIS, "key_prefix": prefix},
            "tiers": [{"name": "small", "level": 1, "model": "model-small",
                       "price_per_mtok": {"input": 1.0, "output": 2.0}, "workers": [{"url": url}]}],
            "health": {"interval_s": 0.5, "timeout_s": 0.5}, "timeouts": {"connect_s": 1.0, "read_s": 10.0},
            "limits": {"header_read_timeout_s": HEADER_TIMEOUT_S}, "batches": {"enabled": False}}


async def _healthy(url: str) -> None:
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(url + "/health") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError("the gateway did not become healthy")


async def _load(url: str) -> list[float]:
    """Latencies (ms) of REQUESTS requests, CONCURRENCY at a time; a failed one counts as infinite."""
    latencies: list[float] = []
    queue = iter(range(REQUESTS))

    async def client(session: aiohttp.ClientSession) -> None:
        for _ in queue:
            started = time.perf_counter()
            async with session.post(url + "/v1/chat/completions", json=BODY) as response:
                await response.read()
                ok = response.status == 200
            latencies.append((time.perf_counter() - started) * 1000 if ok else float("inf"))
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(client(session) for _ in range(CONCURRENCY)))
    return latencies


def _summary(latencies: list[float]) -> dict:
    cuts = statistics.quantiles(latencies, n=100)
    return {"p50_ms": round(cuts[49], 2), "p99_ms": round(cuts[98], 2),
            "failed": sum(1 for x in latencies if x == float("inf"))}


async def _slow_client(port: int, closed: list[float], started: float) -> None:
    """One connection that sends its headers a byte at a time, forever; when the gateway closes it."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        closed.append(0.0)
        return
    line = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-Slow: " + b"a" * 4096
    try:
        for byte in line:
            writer.write(bytes([byte]))
            await writer.drain()
            try:
                if await asyncio.wait_for(reader.read(1), DRIP_S) == b"":
                    break  # closed by the gateway
            except asyncio.TimeoutError:
                continue
        closed.append(time.perf_counter() - started)
    except (ConnectionError, OSError):
        closed.append(time.perf_counter() - started)
    finally:
        writer.close()


async def _slow_clients(port: int) -> list[float]:
    closed: list[float] = []
    started = time.perf_counter()
    slow = [asyncio.ensure_future(_slow_client(port, closed, started)) for _ in range(SLOW)]
    await asyncio.wait(slow, timeout=HOLD_S)
    for task in slow:
        task.cancel()
    await asyncio.gather(*slow, return_exceptions=True)
    return closed


def _slowloris(port: int, out: multiprocessing.Queue) -> None:
    """The one slow client, in a process of its own: its connections never share the measuring
    client's event loop."""
    out.put(asyncio.run(_slow_clients(port)))


async def _run(workdir: Path) -> dict:
    fake, fake_runner, fake_url = await start_fake(name="small")
    path, port = workdir / "gateway.yaml", free_port()
    prefix = f"tgbench-slowloris:{uuid.uuid4().hex[:8]}:"
    path.write_text(yaml.safe_dump(_config(fake_url, prefix)))
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "--config", str(path), "--port", str(port),
                             "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        await _healthy(url)
        await _load(url)  # warm-up
        quiet = _summary(await _load(url))
        out: multiprocessing.Queue = multiprocessing.Queue()
        slowloris = multiprocessing.Process(target=_slowloris, args=(port, out), daemon=True)
        slowloris.start()
        await asyncio.sleep(DRIP_S)  # every slow connection is open and dripping
        loaded = _summary(await _load(url))
        closed = await asyncio.to_thread(out.get, True, HOLD_S + 30)
        slowloris.join(10)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        await fake_runner.cleanup()
        delete_prefix(prefix)
    within = [t for t in closed if t <= HOLD_S]
    return {"requests": REQUESTS, "concurrency": CONCURRENCY, "slow_connections": SLOW,
            "header_read_timeout_s": HEADER_TIMEOUT_S, "quiet": quiet, "with_slowloris": loaded,
            "p99_ratio": round(loaded["p99_ms"] / quiet["p99_ms"], 2),
            "slow_closed_by_gateway": len(within),
            "slow_closed_max_s": round(max(within), 2) if within else None}


def measure() -> dict:
    with tempfile.TemporaryDirectory(prefix="tiergate-slowloris-") as workdir:
        return asyncio.run(_run(Path(workdir)))


if __name__ == "__main__":
    print(json.dumps(measure()))
