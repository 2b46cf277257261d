"""Where one gateway process spends its CPU per request at saturation: the process of
`benchmarks.gateway` (same config, model "auto", fake upstream) kept busy by a closed loop of
64 connections. First its CPU time per request unprofiled, then under cProfile (main-thread
CPU time): the functions by own and by cumulative time in microseconds per request, and the
cyclic garbage collector's runs.

`python -m benchmarks.gateway_profile [--tree DIR] [--seconds 10] [--top 40] [--stats FILE]`
--tree runs the gateway of another checkout (a `git worktree add --detach DIR REF`). Given
several times, it profiles nothing: every tree's gateway runs at once on one upstream and they
are loaded in turns of --slice seconds, so all see the same machine; it prints each one's CPU
time per request (on a shared machine far steadier than requests/s measured one after another).
cProfile's per-call cost inflates small Python functions: read shares and calls per request,
and never compare its times with benchmarks.gateway's figures.
"""
from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import pstats
import signal
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from benchmarks.gateway import TENANT_KEY, gateway_config
from benchmarks.gateway_calls import BODY, wait_http
from launcher import commands
from launcher.group import ProcessGroup, clean_env
from launcher.processes import free_port

ROOT = Path(__file__).resolve().parents[1]
RUNNER = Path(__file__).with_name("profiled_serve.py")
REDIS_URL = "redis://127.0.0.1:6379/0"  # the local one, as the benchmark's launcher would start


async def _load(url: str, seconds: float, concurrency: int = 64, headers: dict | None = None) -> int:
    """Requests answered by a closed loop of `concurrency` connections over `seconds`."""
    done = 0
    deadline = time.perf_counter() + seconds
    body = dict(BODY, stream=False)

    async def worker(session):
        nonlocal done
        while time.perf_counter() < deadline:
            async with session.post(url, json=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")
            done += 1

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return done


async def _profile(gateway, url: str, seconds: float, concurrency: int, profile: bool = True,
                   headers: dict | None = None) -> tuple[float, int]:
    """(CPU seconds per request without the profiler, requests answered while profiled)."""
    async with aiohttp.ClientSession() as session:
        await wait_http(session, url.rsplit("/v1/", 1)[0] + "/health")
    await _load(url, 2.0, headers=headers)  # warm: connections, caches, the classifier's first calls
    # CPU time per request: on a shared machine steadier than requests/s
    before = _cpu_s(gateway.pid)
    unprofiled = await _load(url, seconds, concurrency, headers)
    cpu_per_request = (_cpu_s(gateway.pid) - before) / unprofiled
    if not profile:
        return cpu_per_request, 0
    gateway.send_signal(signal.SIGUSR1)
    done = await _load(url, seconds, concurrency, headers)
    gateway.send_signal(signal.SIGUSR2)
    return cpu_per_request, done


async def _compare(gateways: list[tuple[str, object, str]], seconds: float, slice_s: float,
                   concurrency: int, headers: dict | None = None) -> dict[str, tuple[int, float]]:
    """name -> (requests, CPU seconds per request), each gateway loaded for `seconds` in turns."""
    async with aiohttp.ClientSession() as session:
        for _, _, url in gateways:
            await wait_http(session, url.rsplit("/v1/", 1)[0] + "/health")
    for _, _, url in gateways:
        await _load(url, 2.0, headers=headers)  # warm
    served = {name: 0 for name, _, _ in gateways}
    cpu = {name: 0.0 for name, _, _ in gateways}
    for turn in range(max(1, round(seconds / slice_s))):
        for name, process, url in gateways if turn % 2 == 0 else gateways[::-1]:
            before = _cpu_s(process.pid)
            served[name] += await _load(url, slice_s, concurrency, headers)
            cpu[name] += _cpu_s(process.pid) - before
    return {name: (served[name], cpu[name] / served[name]) for name in served}


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; no psutil needed)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def report(stats_path: Path, requests: int, top: int) -> str:
    out = io.StringIO()
    stats = pstats.Stats(str(stats_path), stream=out)
    total = stats.total_tt
    out.write(f"{requests} requests; profiled main-thread time {total:.2f} s = "
              f"{total / requests * 1e6:.0f} us per request\n")
    collected = json.loads(Path(str(stats_path) + ".gc.json").read_text())
    out.write("cyclic GC (inside the times below), per request and per run: " + ", ".join(
        f"gen{g} {runs / requests:.4f} runs {seconds / requests * 1e6:.1f} us ({seconds / max(runs, 1) * 1e3:.2f} ms)"
        for g, (runs, seconds) in enumerate(zip(collected["runs"], collected["seconds"]))) + "\n")
    rows = [(key, value) for key, value in stats.stats.items()]
    for title, column in (("own time", 2), ("cumulative time", 3)):
        out.write(f"\n-- by {title}: us/request, calls/request, share of total, function\n")
        for (path, line, name), value in sorted(rows, key=lambda r: r[1][column], reverse=True)[:top]:
            where = f"{_short(path)}:{line}({name})"
            out.write(f"{value[column] / requests * 1e6:9.1f} {value[1] / requests:7.2f} "
                      f"{value[column] / total:6.1%}  {where}\n")
    return out.getvalue()


def _short(path: str) -> str:
    for marker in ("site-packages/", "/lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path.replace(str(ROOT) + "/", "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, action="append",
                        help="the checkout whose gateway is profiled (default: this one); several: compared")
    parser.add_argument("--slice", type=float, default=2.0, help="with several trees: seconds per turn")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--stats", type=Path, default=None, help="also keep the raw result here")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (1: one at a time)")
    parser.add_argument("--tenants", action="store_true",
                        help="benchmarks.gateway --tenants' config: a tenant's key, reserved and settled in Redis")
    parser.add_argument("--cpu-only", action="store_true", help="only the CPU time per request, no profile")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree or [ROOT]]
    tmp = Path(tempfile.mkdtemp(prefix="tiergate-profile-"))
    stats_path = args.stats or tmp / "gateway.pstats"
    up_port = free_port()
    group = ProcessGroup(log_dir=tmp / "logs")
    try:
        group.spawn("upstream", commands.fake_upstream(up_port, "--chunks", "8"))
        gateway_config(f"http://127.0.0.1:{up_port}", tmp / "gateway.yaml", tenants=args.tenants, redis_url=REDIS_URL)
        headers = {"Authorization": f"Bearer {TENANT_KEY}"} if args.tenants else None
        gateways = [_start(group, tree, i, tmp, stats_path) for i, tree in enumerate(trees)]
        if len(gateways) > 1:
            results = asyncio.run(_compare(gateways, args.seconds, args.slice, args.concurrency, headers))
            for name, (served, cpu) in results.items():
                print(f"{name}: {served} requests, gateway process CPU time {cpu * 1e6:.0f} us per request")
            return
        (_, gateway, url), = gateways
        cpu, done = asyncio.run(_profile(gateway, url, args.seconds, args.concurrency, not args.cpu_only, headers))
        print(f"gateway process CPU time, unprofiled: {cpu * 1e6:.0f} us per request")
        if args.cpu_only:
            return
        deadline = time.monotonic() + 30
        while not stats_path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # the process writes its stats on SIGUSR2
        print(report(stats_path, done, args.top))
    finally:
        group.stop()


def _start(group: ProcessGroup, tree: Path, index: int, tmp: Path, stats_path: Path) -> tuple[str, object, str]:
    """(name, process, chat URL) of one gateway process run from `tree` by profiled_serve.py."""
    port = free_port()
    gateway = ProcessGroup(log_dir=tmp / "logs", cwd=tree).spawn(
        f"gateway-{index}", [sys.executable, str(RUNNER), str(stats_path), "--config", str(tmp / "gateway.yaml"),
                             "--port", str(port)],
        env=clean_env(PYTHONPATH=str(tree), TIERGATE_REDIS_URL=REDIS_URL))
    group.procs.append(gateway)
    group.wait_port(port, timeout_s=120)  # fails fast, with the logs, if the gateway exits
    return f"{index}:{tree.name}", gateway, f"http://127.0.0.1:{port}/v1/chat/completions"


if __name__ == "__main__":
    main()
