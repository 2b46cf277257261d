"""Soak test (`python -m benchmarks.soak`): does the stack stay flat under hours of traffic?

Mixed open-loop traffic (Poisson arrivals at --rate req/s over every tier plus "auto",
streaming and not) runs for --minutes (default 30) while the RSS of the gateway's processes
and of every worker is sampled from /proc every --sample-s seconds. After the warm-up
(--warmup-minutes, default 10% of the run) memory must not keep growing: the report gives each
process's least-squares slope in % of its mean per 10 minutes (goal: under 1%), and the TTFT
and end-to-end p50/p99 of --windows equal post-warm-up windows with the last/first drift ratio.

What it soaks:
  (default)          the real local stack, started as `make run` does (free gateway port; fails
                     clearly when the config's worker ports are taken, e.g. by a running `make run`)
  --self-contained   fake upstreams and a real gateway (quick; the gateway alone)
  --url U --pids P   a running stack; P: comma-separated PIDs, each sampled with its descendants
                     (give `make run`'s launcher PID to cover everything)

The slope extrapolates: a run of a few minutes mostly measures the end of warm-up (allocator
pools, caches filling), so judge memory on runs of 30 minutes or more. Keep --rate under the
sustained rate that `python -m benchmarks.load` finds: past it the queue grows and latency drifts
whatever the stack's health (the default 0.5/s suits the CPU stack on a small machine).
A progress line goes to stderr every --progress-s seconds; the last stdout line is one JSON object.
The launched stack is stopped with SIGTERM and checked for leftover processes.
Example: .venv/bin/python -m benchmarks.soak --minutes 60 --rate 1
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections import Counter

import aiohttp

from measure import rss
from measure.open_loop import models_of, send_one
from measure.stats import drift, latency_windows


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=30.0, help="length of the run, warm-up included")
    p.add_argument("--warmup-minutes", type=float, default=None, help="default: 10%% of --minutes")
    p.add_argument("--rate", type=float, default=0.5, help="mean arrivals per second (open loop)")
    p.add_argument("--sample-s", type=float, default=10.0, help="RSS sampling interval")
    p.add_argument("--windows", type=int, default=3, help="post-warm-up latency windows")
    p.add_argument("--goal-pct-per-10min", type=float, default=1.0, help="RSS slope goal")
    p.add_argument("--max-drift", type=float, default=1.5, help="latency: largest last/first window ratio")
    p.add_argument("--progress-s", type=float, default=30.0)
    p.add_argument("--stream-share", type=float, default=0.5)
    p.add_argument("--max-in-flight", type=int, default=256)
    p.add_argument("--models", default="", help="comma-separated models to mix (default: every tier and auto)")
    p.add_argument("--keys", default=os.environ.get("TIERGATE_API_KEYS", ""), help="tenant API keys to mix")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--config", default="config/tiergate.yaml", help="the local stack's config")
    p.add_argument("--self-contained", action="store_true")
    p.add_argument("--url", help="soak a running stack at this URL (with --pids)")
    p.add_argument("--pids", default="", help="with --url: PIDs whose process trees to sample")
    args = p.parse_args(argv)
    if bool(args.url) != bool(args.pids):
        p.error("--url and --pids go together")
    if args.warmup_minutes is None:
        args.warmup_minutes = args.minutes / 10
    if not 0 <= args.warmup_minutes < args.minutes:
        p.error("--warmup-minutes must be below --minutes")
    return args


class Soak:
    def __init__(self, args, url: str, keys: list, pids: list[int]):
        self.args, self.url, self.keys = args, url, keys
        self.procs = [rss.describe(pid) for pid in pids]
        self.series: dict[int, list[tuple[float, int]]] = {pid: [] for pid in pids}
        self.exited: set[int] = set()
        self.results: list[dict] = []
        self.in_flight: set[asyncio.Task] = set()
        self.shed = 0
        self.t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def sample(self) -> None:
        t = self.now()
        for pid in self.series:
            kb = rss.rss_kb(pid)
            if kb is None:
                self.exited.add(pid)
            else:
                self.series[pid].append((t, kb))

    async def _send(self, session, model: str, key, stream: bool, rng: random.Random) -> None:
        t = self.now()
        result = await send_one(session, self.url, key, model, stream, rng)
        self.results.append(dict(result, t=t))

    async def traffic(self, models: list[str], duration_s: float) -> None:
        rng = random.Random(self.args.seed)
        timeout = aiohttp.ClientTimeout(total=120)
        connector = aiohttp.TCPConnector(limit=self.args.max_in_flight)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            next_at = 0.0
            while (next_at := next_at + rng.expovariate(self.args.rate)) < duration_s:
                await asyncio.sleep(max(0.0, next_at - self.now()))
                if len(self.in_flight) >= self.args.max_in_flight:
                    self.shed += 1  # the client could not even send it: counted, not queued
                    continue
                task = asyncio.create_task(self._send(session, rng.choice(models), rng.choice(self.keys),
                                                      rng.random() < self.args.stream_share, rng))
                self.in_flight.add(task)
                task.add_done_callback(self.in_flight.discard)
            if self.in_flight:
                await asyncio.wait(set(self.in_flight))

    async def every(self, seconds: float, action, done: asyncio.Event) -> None:
        while not done.is_set():
            action()
            try:
                await asyncio.wait_for(done.wait(), seconds)
            except asyncio.TimeoutError:
                pass

    def progress(self) -> None:
        errors = sum(r.get("status") != 200 for r in self.results)
        mb = Counter()
        for p in self.procs:
            if self.series[p["pid"]]:
                mb[p["role"]] += self.series[p["pid"]][-1][1] / 1024
        memory = " ".join(f"{role}={v:.0f}MB" for role, v in sorted(mb.items()))
        print(f"[soak] {self.now():.0f}s/{self.args.minutes * 60:.0f}s requests={len(self.results)} "
              f"errors={errors} in_flight={len(self.in_flight)} rss {memory}", file=sys.stderr, flush=True)

    async def run(self, models: list[str]) -> dict:
        duration_s, warmup_s = self.args.minutes * 60, self.args.warmup_minutes * 60
        done = asyncio.Event()
        self.t0 = time.monotonic()
        background = [asyncio.create_task(self.every(self.args.sample_s, self.sample, done)),
                      asyncio.create_task(self.every(self.args.progress_s, self.progress, done))]
        try:
            await self.traffic(models, duration_s)
        finally:
            done.set()
            await asyncio.gather(*background)
        self.sample()
        self.progress()
        return self.report(models, warmup_s, duration_s)

    def report(self, models: list[str], warmup_s: float, duration_s: float) -> dict:
        args = self.args
        processes = [rss.summarise(p, self.series[p["pid"]], warmup_s) for p in self.procs]
        judged = [p for p in processes if p["judged"]]
        slopes = [p.get("slope_pct_per_10min") for p in judged]
        worst = max((s for s in slopes if s is not None), default=None)
        memory_ok = bool(judged) and None not in slopes and worst < args.goal_pct_per_10min and not self.exited
        windows = latency_windows(self.results, warmup_s, duration_s, args.windows)
        ratios = drift(windows)
        latency_ok = all(r is not None and r <= args.max_drift for r in ratios.values())
        errors = Counter(str(r.get("status")) for r in self.results if r.get("status") != 200)
        return {"benchmark": "soak", "url": self.url, "minutes": args.minutes, "warmup_minutes": args.warmup_minutes,
                "rate_rps": args.rate, "models": models, "requests": len(self.results),
                "ok": len(self.results) - sum(errors.values()), "errors": sum(errors.values()),
                "errors_by_status": dict(errors), "shed_by_client": self.shed,
                "rss": {"goal_pct_per_10min": args.goal_pct_per_10min, "max_slope_pct_per_10min": worst,
                        "meets_goal": memory_ok, "exited_pids": sorted(self.exited), "processes": processes},
                "latency": {"windows": windows, "drift_last_over_first": ratios, "max_drift": args.max_drift,
                            "stable": latency_ok},
                "verdict": "pass" if memory_ok and latency_ok and not errors and not self.shed else "fail"}


async def _main(args) -> dict:
    keys = [k for k in args.keys.split(",") if k] or [None]
    stack, url, mode = None, (args.url or "").rstrip("/"), "url"
    if args.self_contained:
        from benchmarks.load_stack import SelfContainedStack
        stack, mode = SelfContainedStack(), "self-contained"
    elif not args.url:
        from benchmarks.local_stack import LocalStack
        stack, mode = LocalStack(args.config), "local-stack"
    if stack:
        try:
            url = await asyncio.to_thread(stack.start)
        except RuntimeError:
            await asyncio.to_thread(stack.stop)
            raise
        keys = getattr(stack, "keys", keys)
    roots = ([p.pid for p in stack.procs] if mode == "self-contained" else [stack.proc.pid] if stack
             else [int(p) for p in args.pids.split(",") if p])
    pids = list(dict.fromkeys(pid for root in roots for pid in rss.tree(root)))
    try:
        models = [m for m in args.models.split(",") if m] or await models_of(url, keys[0])
        out = await Soak(args, url, keys, pids).run(models)
    finally:
        if stack:
            await asyncio.to_thread(stack.stop)
    out["mode"] = mode
    if stack:  # everything we started must be gone
        out["left_running"] = [pid for pid in pids if rss.alive(pid)]
        out["verdict"] = out["verdict"] if not out["left_running"] else "fail"
    return out


def main(argv=None) -> int:
    try:
        out = asyncio.run(_main(parse_args(argv)))
    except RuntimeError as exc:  # the stack could not start: say why, no traceback
        print(f"soak: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
