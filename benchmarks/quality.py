"""Does quality sampling cost clients latency? `python -m benchmarks.quality [--rate 1.0]`

Two gateway processes, identical except for `quality.sampling_rate` (0 vs --rate), in front of
one fake upstream (launcher/fake_upstream.py), using the shared Redis under a fresh prefix.
Rounds alternate between them (off, on, off, on, ...) so machine noise hits both alike; every
request goes to the sampled (non-top) tier. Prints client p50/p99 for both and the monitor's
own counts (sampled / dropped / scored) to show sampling really ran; JSON on the last line.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import redis
import yaml

from benchmarks.gateway_calls import wait_http
from launcher import commands
from launcher.group import ProcessGroup
from launcher.processes import free_port
from measure.stats import percentile

BODY = {"model": "small", "max_tokens": 16,
        "messages": [{"role": "user", "content": "Give me three tips for writing clear emails."}]}


def _config(upstream: str, redis_url: str, prefix: str, rate: float, path: Path) -> None:
    tiers = [{"name": name, "level": level, "model": "fake", "price_per_mtok": {"input": 1, "output": 2},
              "workers": [{"url": upstream}]} for name, level in (("small", 1), ("top", 4))]
    path.write_text(yaml.safe_dump({"tiers": tiers, "redis": {"url": redis_url, "key_prefix": prefix},
                                    "quality": {"sampling_rate": rate, "concurrency": 2, "queue_size": 256}}))


async def _round(session, url: str, n: int, concurrency: int) -> list[float]:
    latencies: list[float] = []
    todo = iter(range(n))

    async def worker():
        for _ in todo:
            started = time.perf_counter()
            async with session.post(url + "/v1/chat/completions", json=BODY) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def _summary(latencies: list[float]) -> dict:
    values = sorted(latencies)
    return {"requests": len(values), "p50_ms": round(percentile(values, 50) * 1000, 3),
            "p99_ms": round(percentile(values, 99) * 1000, 3)}


async def run(args) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="tiergate-quality-bench-"))
    prefix = f"tgbench-quality:{uuid.uuid4().hex[:8]}:"
    group = ProcessGroup()
    try:
        fake_port = free_port()
        group.spawn("upstream", commands.fake_upstream(fake_port, "--chunks", "16", "--delay", str(args.delay)))
        urls = {}
        for mode, rate in (("off", 0.0), ("on", args.rate)):
            _config(f"http://127.0.0.1:{fake_port}", args.redis_url, prefix + mode + ":", rate, tmp / f"{mode}.yaml")
            port = free_port()
            group.spawn(f"gateway-{mode}", commands.gateway_serve(tmp / f"{mode}.yaml", port))
            urls[mode] = f"http://127.0.0.1:{port}"
        connector = aiohttp.TCPConnector(limit=args.concurrency * 2)
        async with aiohttp.ClientSession(connector=connector) as session:
            await wait_http(session, f"http://127.0.0.1:{fake_port}/health")
            for url in urls.values():
                await wait_http(session, url + "/health")
                await _round(session, url, 50, args.concurrency)  # warm up connections and code paths
            latencies = {"off": [], "on": []}
            for _ in range(args.rounds):
                for mode in ("off", "on"):
                    latencies[mode] += await _round(session, urls[mode], args.requests, args.concurrency)
            await asyncio.sleep(2.0)  # let the background re-asks finish
            async with session.get(urls["on"] + "/v1/quality") as response:
                quality = await response.json()
        off, on = _summary(latencies["off"]), _summary(latencies["on"])
        return {"benchmark": "quality_sampling_latency", "sampling_rate": args.rate, "upstream_delay_s": args.delay,
                "concurrency": args.concurrency, "off": off, "on": on,
                "p50_ratio_on_off": round(on["p50_ms"] / off["p50_ms"], 3),
                "p99_ratio_on_off": round(on["p99_ms"] / off["p99_ms"], 3),
                "monitor_counts": quality["local_counts"],
                "mean_similarity": quality["tiers"]["small"]["recent"]["mean_similarity"]}
    finally:
        group.stop()
        client = redis.Redis.from_url(args.redis_url)
        keys = list(client.scan_iter(match=prefix + "*", count=500))
        if keys:
            client.delete(*keys)
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=1.0, help="sampling rate of the 'on' gateway")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=250, help="requests per round and mode")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.02, help="fake upstream seconds per answer")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    result = asyncio.run(run(parser.parse_args()))
    for mode in ("off", "on"):
        print(f"sampling {mode:3}: p50 {result[mode]['p50_ms']:.2f} ms  p99 {result[mode]['p99_ms']:.2f} ms")
    print(f"monitor: {result['monitor_counts']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
