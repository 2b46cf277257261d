"""The gateway on one Redis, a Sentinel group and a Cluster, side by side in one run.

`python -m benchmarks.redis_modes` (or `python -m benchmarks.gateway --redis-modes`) starts a fake
upstream and, for each mode, its Redis topology on loopback (launcher/redis_topology.py) and one
gateway process whose tenant has limits, so every request runs admission and settlement in Redis.
Per mode: the added latency p50/p99 (requests sent direct and through each mode's gateway in turn,
so all see the same noise) and requests/s of each gateway process. Then,
for Sentinel and Cluster, a master is SIGKILLed while requests go one at a time
(`on_redis_error: closed`): the seconds until a request is served again, and how many were
refused meanwhile; and what `WAIT 1` after each settlement would cost. Prints one JSON object as
its last line.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import aiohttp

from benchmarks.gateway_calls import BODY, one_call, wait_http
from benchmarks.load import closed_loop_rps
from launcher import commands
from launcher.group import ProcessGroup
from launcher.processes import free_port
from measure.stats import percentile
from launcher.redis_topology import (cluster_master_of, sentinel_master, start_cluster, start_sentinel_group,
                                     start_single)
from policies.keys import hash_key

KEY = "sk-bench-redis-modes"
TENANT = "bench"
STARTS = {"single": start_single, "sentinel": start_sentinel_group, "cluster": start_cluster}


def gateway_config(upstream: str, redis: dict, path: Path, usage_dir: Path) -> None:
    path.write_text(json.dumps({  # JSON is YAML
        "tiers": [{"name": "bench", "level": 1, "model": "bench-model", "price_per_mtok": {"input": 0.1, "output": 0.2},
                   "workers": [{"url": upstream}]}],
        "health": {"interval_s": 5.0}, "redis": {**redis, "key_prefix": "bench:", "socket_timeout_s": 1.0},
        "policy": {"on_redis_error": "closed", "usage_log": {"dir": str(usage_dir)}},
        "tenants": {TENANT: {"keys": [{"id": "k", "sha256": hash_key(KEY)}],
                             "rate_limits": {"requests_per_minute": 10_000_000, "tokens_per_minute": 10_000_000_000},
                             "budgets": {"daily_usd": {"hard": 1_000_000}}}}}))


async def served_again_after_kill(session, base: str, kill) -> dict:
    """Requests one at a time; kill the master after a few; seconds until one is served again."""
    headers = {"Authorization": f"Bearer {KEY}"}
    url, body = base + "/v1/chat/completions", dict(BODY, model="bench")
    for _ in range(20):
        async with session.post(url, json=body, headers=headers) as response:
            assert response.status == 200, await response.text()
    killed = time.monotonic()
    kill()
    refused, deadline = 0, killed + 60
    while time.monotonic() < deadline:
        async with session.post(url, json=body, headers=headers) as response:
            await response.read()
            if response.status == 200 and refused:
                return {"served_again_s": round(time.monotonic() - killed, 2), "refused_503": refused}
            if response.status != 200:
                refused += 1
                await asyncio.sleep(0.01)
    raise RuntimeError("not served again within 60 s")


def kill_master(top):
    if top.mode == "cluster":
        return lambda: top.kill(cluster_master_of(top, "{" + TENANT + "}"))
    return lambda: top.kill(sentinel_master(top))


def wait_cost(top, rounds: int = 2000) -> dict:
    """What `WAIT 1` (one replica has it) would add to a settlement: p50/p99 of an INCRBY alone and
    followed by WAIT, on the Sentinel group's master."""
    client = top.client(sentinel_master(top))
    plain, waited = [], []
    for i in range(rounds):
        started = time.perf_counter()
        client.incrby("bench:wait-cost", 1)
        plain.append(time.perf_counter() - started)
        started = time.perf_counter()
        client.incrby("bench:wait-cost", 1)
        client.execute_command("WAIT", 1, 1000)
        waited.append(time.perf_counter() - started)
    plain.sort()
    waited.sort()
    return {f"added_ms_p{q}": round((percentile(waited, q) - percentile(plain, q)) * 1000, 3) for q in (50, 99)}


async def side_by_side(session, upstream: str, bases: dict[str, str], n: int) -> dict:
    """Added latency per mode: each round sends the request direct and through every mode's
    gateway in turn, so all of them see the same machine noise."""
    path, headers = "/v1/chat/completions", {"Authorization": f"Bearer {KEY}"}
    body, direct_body = dict(BODY, model="bench"), dict(BODY, model="bench-model")
    times = {"direct": [], **{mode: [] for mode in bases}}
    calls = {"direct": (upstream + path, direct_body, {}), **{m: (b + path, body, headers) for m, b in bases.items()}}
    for round_ in range(n + 50):  # the first 50 warm every path
        for name, (url, payload, head) in calls.items():
            took = await one_call(session, url, payload, head, False)
            if round_ >= 50:
                times[name].append(took)
    direct = sorted(times.pop("direct"))
    out = {}
    for mode, took in times.items():
        took.sort()
        out[mode] = {f"added_ms_p{q}": round((percentile(took, q) - percentile(direct, q)) * 1000, 3) for q in (50, 99)}
    return out


async def run(n: int, seconds: float) -> dict:
    up_port = free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    tmp = Path(tempfile.mkdtemp(prefix="tiergate-redis-modes-"))
    group, tops, bases = ProcessGroup(), {}, {}
    try:
        group.spawn("upstream", commands.fake_upstream(up_port, "--chunks", "8"))
        for mode, start in STARTS.items():
            tops[mode] = start(tmp / mode)
            port = free_port()
            gateway_config(upstream, tops[mode].settings, tmp / f"{mode}.yaml", tmp / f"usage-{mode}")
            group.spawn(f"gateway-{mode}", commands.gateway_processes(tmp / f"{mode}.yaml", port, workers=1))
            bases[mode] = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=16)) as session:
            for base in (upstream, *bases.values()):
                await wait_http(session, base + "/health")
            result = await side_by_side(session, upstream, bases, n)
            headers = {"Authorization": f"Bearer {KEY}"}
            for mode, base in bases.items():
                result[mode]["rps"] = round(await closed_loop_rps(base + "/v1/chat/completions",
                                                                  dict(BODY, model="bench"), headers, seconds), 1)
            result["sentinel"]["wait_1_replica"] = wait_cost(tops["sentinel"])
            for mode in ("sentinel", "cluster"):
                result[mode]["failover"] = await served_again_after_kill(session, bases[mode], kill_master(tops[mode]))
    finally:
        group.stop()
        for top in tops.values():
            top.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    single = result["single"]["added_ms_p50"]
    result["over_single_p50_ms"] = {m: round(result[m]["added_ms_p50"] - single, 3) for m in ("sentinel", "cluster")}
    result["rps_tool"], result["cpu_count"] = "aiohttp", os.cpu_count()
    return result


def measure(n: int = 1000, seconds: float = 8.0) -> dict:
    return asyncio.run(run(n, seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=1000, help="requests per latency series")
    parser.add_argument("--seconds", type=float, default=8.0, help="duration of each requests/s run")
    args = parser.parse_args()
    print(json.dumps(measure(args.n, args.seconds)))


if __name__ == "__main__":
    main()
