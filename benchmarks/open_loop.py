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

from measure.open_loop import meets_slo, models_of, run_at


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
