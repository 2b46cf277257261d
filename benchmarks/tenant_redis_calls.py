"""What one tenant request asks of Redis: `benchmarks.gateway --tenants`' gateway (a tenant with
rate limits and a hard budget, its key without budgets of its own) on a redis-server of its own,
requests sent one at a time, every command seen through MONITOR and each script's own run time
through SLOWLOG. Per request: the commands sent while it was open (its critical path: its round
trips, and now and then a background flush), the words of each script call, and the commands its
scripts ran inside Redis (SLOWLOG's times are wall time: on a loaded machine, compare runs side by side).

`python -m benchmarks.tenant_redis_calls [--tree DIR] [-n 40]`; --tree runs the gateway of another
checkout (`git worktree add --detach DIR REF`). Prints one JSON object as its last line.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import aiohttp
import redis

from benchmarks.gateway import TENANT_KEY, gateway_config
from benchmarks.gateway_calls import BODY, wait_http
from launcher import commands
from launcher.group import ProcessGroup, clean_env
from launcher.processes import free_port, start_persistent_redis

ROOT = Path(__file__).resolve().parents[1]


def _watch(port: int, seen: list, stop: threading.Event) -> None:
    client = redis.Redis(port=port, socket_timeout=3600)  # held: the monitor's connection is its pool's
    with client.monitor() as monitor:
        while not stop.is_set():
            try:
                seen.append(monitor.next_command())
            except redis.ConnectionError:
                return


async def _send(url: str, n: int, gap_s: float) -> list[tuple[float, float]]:
    """(sent, answered) wall-clock times of `n` requests, one at a time, after 20 to warm up."""
    headers = {"Authorization": f"Bearer {TENANT_KEY}"}
    async with aiohttp.ClientSession() as session:
        await wait_http(session, url.rsplit("/v1/", 1)[0] + "/health")
        for _ in range(20):
            async with session.post(url, json=BODY, headers=headers) as response:
                await response.read()
        await asyncio.sleep(1.0)
        spans = []
        for _ in range(n):
            sent = time.time()
            async with session.post(url, json=BODY, headers=headers) as response:
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}: {(await response.text())[:200]}")
                await response.read()
            spans.append((sent, time.time()))
            await asyncio.sleep(gap_s)  # the gap tells a request's commands from the next one's
        return spans


def _per_request(seen: list, spans: list[tuple[float, float]]) -> dict:
    """Commands sent while a request was open (a background timer's may land there too: rare)."""
    inside, scripts, words = Counter(), Counter(), []
    for command in seen:
        if not any(sent <= command["time"] <= answered for sent, answered in spans):
            continue
        name = command["command"].split(" ", 1)[0]
        if command.get("client_type") == "lua":
            scripts[name] += 1
        else:
            inside[name] += 1
            if name == "EVALSHA":
                words.append(len(command["command"].split(" ")) - 1)
    n = len(spans)
    return {"commands_while_open": round(sum(inside.values()) / n, 2),  # with the console's once-a-second flush
            "commands": {k: round(v / n, 2) for k, v in sorted(inside.items())},
            "script_calls_by_words": {str(w): round(c / n, 2) for w, c in sorted(Counter(words).items())},
            "script_inner_calls": round(sum(scripts.values()) / n, 2),
            "script_inner": {k: round(v / n, 2) for k, v in sorted(scripts.items())}}


def _script_us(port: int, n: int) -> dict[str, float]:
    """Median run time inside Redis (SLOWLOG, µs) of each script call seen at least n times, by its shape."""
    runs: dict[str, list[int]] = {}
    for entry in redis.Redis(port=port).slowlog_get(100_000):
        words = entry["command"].decode(errors="replace").split(" ")
        if words[0] == "EVALSHA":
            runs.setdefault(f"{words[2]} keys, {len(words) - 1} words", []).append(entry["duration"])
    return {name: statistics.median(us) for name, us in runs.items() if len(us) >= n}


def measure(tree: Path, n: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="tiergate-redis-calls-"))
    up, gw, redis_port = free_port(), free_port(), free_port()
    group = ProcessGroup()
    stop, seen = threading.Event(), []
    try:
        group.spawn("upstream", commands.fake_upstream(up, "--chunks", "8"))
        group.procs.append(start_persistent_redis(redis_port, tmp))
        gateway_config(f"http://127.0.0.1:{up}", tmp / "gateway.yaml", tenants=True,
                       redis_url=f"redis://127.0.0.1:{redis_port}/0")
        gateway = ProcessGroup(cwd=tree)
        gateway.spawn("gateway", commands.gateway_processes(tmp / "gateway.yaml", gw, workers=1),
                      env=clean_env(PYTHONPATH=str(tree)))
        group.procs.extend(gateway.procs)
        client = redis.Redis(port=redis_port)
        client.config_set("slowlog-log-slower-than", 0)
        client.config_set("slowlog-max-len", 100_000)
        watcher = threading.Thread(target=_watch, args=(redis_port, seen, stop), daemon=True)

        watcher.start()
        client.slowlog_reset()
        spans = asyncio.run(_send(f"http://127.0.0.1:{gw}/v1/chat/completions", n, 0.05))
        return _per_request(seen, spans) | {"script_us_median": _script_us(redis_port, n // 2)}
    finally:
        stop.set()
        group.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose gateway is measured")
    parser.add_argument("-n", type=int, default=40, help="requests measured")
    args = parser.parse_args()
    print(json.dumps({"tree": str(args.tree.resolve()), "requests": args.n} | measure(args.tree.resolve(), args.n)))


if __name__ == "__main__":
    main()
