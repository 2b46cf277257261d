"""`python -m benchmarks.priority_worker`: one worker's interactive TTFT beside batch work, by
batch concurrency, to choose how many batch requests a worker may have in flight.

Starts one SmolLM2 worker (1 torch thread, as the local stack gives each of its workers on a
2-core machine). For each batch concurrency N: interactive streamed chat requests at a steady
rate, first alone (N=0), then beside N batch-priority streams (x-tiergate-priority: batch)
kept in flight for the whole window; and the same N batch streams alone, for their throughput.
Rounds repeat the sweep so machine noise hits every N alike; figures are medians over rounds.
Goal per N: TTFT p99 beside the batch <= 1.5x alone, batch tok/s beside >= 70% of alone.
The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.priority_traffic import BatchLanes, add_traffic_args, interactive_load, ttft_summary
from launcher.processes import free_port, wait_healthy

ROOT = Path(__file__).parents[1]


def start_worker(args) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "backends.worker", "--model", args.model, "--port", str(port),
           "--threads", str(args.threads), *args.worker_flags.split()]
    proc = subprocess.Popen(cmd, cwd=args.worker_cwd or ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    if not wait_healthy(url, proc, 180):
        proc.kill()
        raise RuntimeError(f"worker did not start: {' '.join(cmd)}")
    return proc, url


async def batch_window(url: str, args, n: int, with_interactive: bool) -> dict:
    """N batch lanes; after a warm-up, one window of interactive traffic (or of nothing)."""
    lanes = BatchLanes([url], args.model, n, args.batch_max_tokens) if n else None
    if lanes:
        lanes.start()
        await asyncio.sleep(args.warmup_s)  # lanes ramped up and past their first prefills
    start = time.perf_counter()
    out: dict = {}
    if with_interactive:
        results = await interactive_load(url, args.model, args.rate, args.requests, args.max_tokens)
        out.update(ttft_summary(results))
    else:
        await asyncio.sleep(args.requests / args.rate)
    end = time.perf_counter()
    if lanes:
        out["batch_tok_s"] = lanes.tokens_per_s(start, end)
        await lanes.stop()
        out["batch_errors"] = lanes.errors()
    return out


def _median(rows: list[dict], key: str):
    values = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(values), 4) if values else None


async def sweep(url: str, args) -> dict:
    rounds: dict[int, list[dict]] = {n: [] for n in [0, *args.concurrency]}
    await interactive_load(url, args.model, args.rate, 3, args.max_tokens)  # warm-up: first requests run slow
    for r in range(args.rounds):
        for n in rounds:
            row = await batch_window(url, args, n, True)
            if n:
                row["batch_tok_s_alone"] = (await batch_window(url, args, n, False))["batch_tok_s"]
            rounds[n].append(row)
            print(json.dumps({"round": r, "batch_concurrency": n, **row}), flush=True)
    table = {}
    for n, rows in rounds.items():
        table[n] = {k: _median(rows, k) for k in ("ttft_p50_s", "ttft_p99_s", "batch_tok_s", "batch_tok_s_alone")}
        table[n]["errors"] = sum(r.get("errors", 0) + r.get("batch_errors", 0) for r in rows)
    alone = table[0]["ttft_p99_s"]
    for n, row in table.items():
        if n and alone and row["ttft_p99_s"] and row["batch_tok_s_alone"]:
            row["ttft_p99_ratio"] = round(row["ttft_p99_s"] / alone, 3)
            row["batch_throughput_ratio"] = round(row["batch_tok_s"] / row["batch_tok_s_alone"], 3)
            row["goals_met"] = row["ttft_p99_ratio"] <= 1.5 and row["batch_throughput_ratio"] >= 0.7
    within = [n for n, row in table.items() if row.get("goals_met")]
    return {"benchmark": "priority_worker", "model": args.model, "threads": args.threads,
            "worker_flags": args.worker_flags, "rate_rps": args.rate, "requests": args.requests,
            "rounds": args.rounds, "by_batch_concurrency": table,
            "largest_concurrency_meeting_goals": max(within) if within else None}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--threads", type=int, default=1, help="the worker's torch threads")
    p.add_argument("--worker-flags", default="", help="more `python -m backends.worker` flags, space-separated")
    p.add_argument("--worker-cwd", help="run the worker from another checkout (A/B a scheduler change)")
    p.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[2, 4, 8, 16],
                   help="batch concurrencies to sweep, comma-separated")
    add_traffic_args(p)
    p.add_argument("--requests", type=int, default=40, help="interactive requests per window")
    p.add_argument("--warmup-s", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=2)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    proc, url = start_worker(args)
    try:
        result = asyncio.run(sweep(url, args))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(json.dumps(result, separators=(",", ":")))


if __name__ == "__main__":
    main()
