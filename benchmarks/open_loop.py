"""Open-loop load against a running Tiergate (`python -m benchmarks.load`).

Requests arrive as a Poisson process at a given rate whatever the latency (open loop: a slow
gateway gets a queue, not fewer arrivals), mixed over tiers (models) and tenants (keys),
streaming and not. Per tier (the x-tiergate-tier answer header): TTFT and time per output
token (streamed requests: a whole answer has no visible first token) and end-to-end p50/p95/p99, throughput, errors and the P99/P50 ratio (health rule:
under 5x healthy, over 10x means scheduling or memory contention). Then it searches for the
highest rate whose TTFT p99 stays under --slo-ttft-s (doubling, then bisecting).
The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from collections import defaultdict

import aiohttp

from benchmarks.load import percentile

PROMPTS = ["What is 2+2?", "Translate 'good morning' into French.",
           "Summarise the causes of the French Revolution in three sentences.",
           "Write a Python function that merges two sorted lists, with tests. " * 3,
           "Explain the proof that there are infinitely many primes, step by step, then generalise it. " * 6]


def latency_stats(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p95": None, "p99": None}
    s = sorted(values)
    return {q: round(percentile(s, int(q[1:])), 5) for q in ("p50", "p95", "p99")}


def streamed_ttfts(ok: list[dict]) -> list[float]:
    """TTFTs of successful answers; only streamed ones have a first token to time."""
    return [r["ttft"] for r in ok if "ttft" in r]


def _ratio(stats: dict) -> float | None:
    return round(stats["p99"] / stats["p50"], 3) if stats["p50"] else None


def _health(ratio: float | None) -> str:
    return "unknown" if ratio is None else "healthy" if ratio < 5 else "contended" if ratio > 10 else "watch"


async def send_one(session, url: str, key: str | None, model: str, stream: bool, rng: random.Random) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": rng.choice(PROMPTS)}],
            "max_tokens": 64, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    started = time.perf_counter()
    out = {"model": model, "stream": stream}
    try:
        async with session.post(f"{url}/v1/chat/completions", json=body, headers=headers) as r:
            out["status"], out["tier"] = r.status, r.headers.get("x-tiergate-tier", model)
            if not stream or r.status != 200:  # no first token to see: only e2e is measured
                doc = await r.json(content_type=None)
                tokens = (doc.get("usage") or {}).get("completion_tokens", 0)
            else:
                tokens, first = 0, None
                async for line in r.content:
                    if line.startswith(b"data: {"):
                        event = json.loads(line[6:])
                        if "error" in event:
                            out["status"] = "stream_error"
                        if event.get("choices") and first is None:
                            first = time.perf_counter() - started
                        tokens = (event.get("usage") or {}).get("completion_tokens", tokens)
                out["ttft"] = first if first is not None else time.perf_counter() - started
        out["e2e"] = time.perf_counter() - started
        out["tokens"] = tokens
        if stream and tokens > 1:
            out["tpot"] = (out["e2e"] - out["ttft"]) / (tokens - 1)
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        out["status"] = type(exc).__name__
    return out


async def run_at(url: str, rate: float, duration_s: float, models: list[str], keys: list, stream_share: float,
                 max_in_flight: int, seed: int) -> dict:
    """One open-loop run: Poisson arrivals at `rate`/s for `duration_s`, then wait for stragglers."""
    rng = random.Random(seed)
    results, tasks, shed = [], set(), 0
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=max_in_flight)) as s:
        start = time.perf_counter()
        next_at = start
        while True:
            next_at += rng.expovariate(rate)
            if next_at - start > duration_s:
                break
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            if len(tasks) >= max_in_flight:  # bounded: count what the client could not even send
                shed += 1
                continue
            task = asyncio.create_task(send_one(s, url, rng.choice(keys), rng.choice(models),
                                            rng.random() < stream_share, rng))
            tasks.add(task)
            task.add_done_callback(lambda t: (tasks.discard(t), results.append(t.result())))
        if tasks:
            await asyncio.wait(set(tasks))
        elapsed = time.perf_counter() - start
    return summarise(results, rate, elapsed, shed)


def summarise(results: list[dict], rate: float, elapsed: float, shed: int) -> dict:
    by_tier = defaultdict(list)
    for r in results:
        by_tier[r.get("tier") or r["model"]].append(r)
    tiers, all_ttft = {}, []
    for tier, rows in sorted(by_tier.items()):
        ok = [r for r in rows if r.get("status") == 200]
        errors = defaultdict(int)
        for r in rows:
            if r.get("status") != 200:
                errors[str(r.get("status"))] += 1
        ttft, e2e = latency_stats(streamed_ttfts(ok)), latency_stats([r["e2e"] for r in ok])
        all_ttft += streamed_ttfts(ok)
        tiers[tier] = {"requests": len(rows), "ok": len(ok), "errors": dict(errors),
                       "ttft_s": ttft, "tpot_s": latency_stats([r["tpot"] for r in ok if "tpot" in r]), "e2e_s": e2e,
                       "output_tokens_per_s": round(sum(r.get("tokens", 0) for r in ok) / elapsed, 2),
                       "p99_p50_ratio": {"ttft": _ratio(ttft), "e2e": _ratio(e2e)},
                       "health": _health(_ratio(e2e))}
    ok_total = sum(t["ok"] for t in tiers.values())
    return {"offered_rate_rps": rate, "requests": len(results), "ok": ok_total, "shed_by_client": shed,
            "errors": len(results) - ok_total + shed,
            "throughput_rps": round(ok_total / elapsed, 3), "ttft_p99_s": latency_stats(all_ttft)["p99"],
            "tiers": tiers}


def meets_slo(report: dict, slo_ttft_s: float, max_error_share: float = 0.01) -> bool:
    p99 = report["ttft_p99_s"]
    sent = report["requests"] + report["shed_by_client"]
    return p99 is not None and p99 <= slo_ttft_s and report["errors"] <= max_error_share * max(sent, 1)


async def search(args, url: str, models: list[str], keys: list) -> dict:
    """Double the rate while the SLO holds, then bisect between the last good and first bad rate."""
    probes, good, bad, rate = [], None, None, args.rate
    for i in range(args.max_probes):
        # long enough for --min-requests arrivals: a p99 over a handful of requests is noise
        duration = max(args.duration, args.min_requests / rate)
        report = await run_at(url, rate, duration, models, keys, args.stream_share, args.max_in_flight,
                              args.seed + i)
        ok = meets_slo(report, args.slo_ttft_s)
        probes.append({"rate_rps": round(rate, 3), "duration_s": round(duration, 1), "requests": report["requests"],
                       "ttft_p99_s": report["ttft_p99_s"], "errors": report["errors"],
                       "meets_slo": ok})
        print(json.dumps(probes[-1]), flush=True)
        if ok:
            good = (rate, report)
        else:
            bad = rate
        if bad is not None and good is not None and bad - good[0] <= args.rate_precision * good[0]:
            break
        rate = rate * 2 if bad is None else ((good[0] if good else 0) + bad) / 2
    # without a failing probe the sustained rate is only a lower bound (raise --max-probes)
    return {"sustained_rate_rps": round(good[0], 3) if good else None, "upper_bound_found": bad is not None,
            "probes": probes,
            "at_sustained_rate": good[1] if good else None}


async def models_of(url: str, key: str | None) -> list[str]:
    """Every tier plus the classifier-routed "auto" model: the route most real traffic takes."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{url}/v1/models", headers=headers) as r:
            r.raise_for_status()
            return [m["id"] for m in (await r.json())["data"]
                    if m.get("tiergate", {}).get("kind") in ("tier", "auto")]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://localhost:8080")
    p.add_argument("--keys", default=os.environ.get("TIERGATE_API_KEYS", ""),
                   help="comma-separated tenant API keys to mix (default $TIERGATE_API_KEYS; none: open policy)")
    p.add_argument("--models", default="", help="comma-separated models/tiers to mix (default: every tier and auto)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of arrivals per rate probe")
    p.add_argument("--rate", type=float, default=4.0, help="starting (or, with --fixed-rate, the only) rate, req/s")
    p.add_argument("--fixed-rate", action="store_true", help="one run at --rate, no search")
    p.add_argument("--slo-ttft-s", type=float, default=1.0)
    p.add_argument("--max-probes", type=int, default=8)
    p.add_argument("--min-requests", type=int, default=40, help="a probe lasts long enough for this many arrivals")
    p.add_argument("--rate-precision", type=float, default=0.1, help="stop bisecting within this share")
    p.add_argument("--stream-share", type=float, default=0.5)
    p.add_argument("--max-in-flight", type=int, default=512)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--self-contained", action="store_true",
                   help="start fake upstreams and a gateway (shared Redis, own prefix) instead of using --url")
    return p.parse_args(argv)


async def _main(args) -> dict:
    keys = [k for k in args.keys.split(",") if k] or [None]
    stack = None
    url = args.url.rstrip("/")
    if args.self_contained:
        from benchmarks.load_stack import SelfContainedStack
        stack = SelfContainedStack()
        url = await asyncio.to_thread(stack.start)
        keys = stack.keys
    try:
        models = [m for m in args.models.split(",") if m] or await models_of(url, keys[0])
        out = {"benchmark": "load", "url": url, "self_contained": bool(stack), "models": models,
               "tenants": len(keys), "slo_ttft_s": args.slo_ttft_s, "duration_s": args.duration}
        if args.fixed_rate:
            report = await run_at(url, args.rate, args.duration, models, keys, args.stream_share,
                                  args.max_in_flight, args.seed)
            out.update(report, meets_slo=meets_slo(report, args.slo_ttft_s))
        else:
            out.update(await search(args, url, models, keys))
        return out
    finally:
        if stack:
            await asyncio.to_thread(stack.stop)


def main(argv=None) -> None:
    print(json.dumps(asyncio.run(_main(parse_args(argv))), separators=(",", ":")))


if __name__ == "__main__":
    main()
