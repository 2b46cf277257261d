"""`python -m benchmarks.priority`: interactive latency and batch throughput side by side, on
the local stack started as `make run` starts it (benchmarks/local_stack.py).

One run, one tier (--tier), four phases:
1. interactive alone: streamed chat requests at a steady open-loop rate through the gateway,
   timed to their first token (TTFT);
2. the batch alone: --batch-size requests drained at once, through the gateway's OpenAI Batch
   API with the `openai` SDK (--batch-via api), or straight to the tier's workers at batch
   priority, --batch-concurrency in flight (--batch-via direct); throughput = completion
   tokens / drain time;
3. the same batch again, with the interactive traffic of phase 1 running until it has drained.
Goals (issue 31): interactive TTFT p99 while the batch drains <= 1.5x its p99 alone, and the
batch beside interactive traffic >= 70% of its throughput alone. The last stdout line is one
JSON object.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os

from benchmarks.local_stack import LocalStack
from benchmarks.priority_batch import drain_direct, drain_via_api
from benchmarks.priority_traffic import add_traffic_args, interactive_load, ttft_summary
from gateway.config import load_config
from launcher.workers import ensure_worker_key

MAX_TTFT_RATIO, MIN_THROUGHPUT_RATIO = 1.5, 0.7


def _tier(config_path: str, name: str):
    tiers = {t.name: t for t in load_config(config_path).tiers}
    if name not in tiers:
        raise SystemExit(f"no tier {name!r} in {config_path} (tiers: {', '.join(tiers)})")
    return tiers[name]


async def drain(args, gateway: str, tier) -> dict:
    if args.batch_via == "api":
        return await drain_via_api(gateway, args.key, tier.name, args.batch_size, args.batch_max_tokens)
    return await drain_direct(tier.workers, tier.model, args.batch_size, args.batch_max_tokens,
                              args.batch_concurrency)


def tok_s(batch: dict) -> float | None:
    return round(batch["completion_tokens"] / batch["drain_s"], 2) if batch["drain_s"] > 0 else None


async def run(args, gateway: str) -> dict:
    tier = _tier(args.config, args.tier)
    headers = {"Authorization": f"Bearer {args.key}"}
    await interactive_load(gateway, tier.name, args.rate, 3, args.max_tokens, headers)  # warm-up
    print(f"interactive alone: {args.interactive_requests} requests at {args.rate}/s", flush=True)
    alone = ttft_summary(await interactive_load(gateway, tier.name, args.rate, args.interactive_requests,
                                                args.max_tokens, headers))
    print(f"interactive alone: {json.dumps(alone)}\nbatch alone: {args.batch_size} requests via {args.batch_via}",
          flush=True)
    batch_alone = await drain(args, gateway, tier)
    print(f"batch alone: {json.dumps(batch_alone)}\nbatch beside interactive traffic", flush=True)
    drained = asyncio.Event()
    # arrivals go on for as long as the batch drains (the count only bounds the loop)
    draining = asyncio.create_task(interactive_load(gateway, tier.name, args.rate, 1_000_000, args.max_tokens,
                                                    headers, stop=drained))
    try:
        batch_beside = await drain(args, gateway, tier)
    finally:
        drained.set()
    beside = ttft_summary(await draining)
    print(f"batch beside: {json.dumps(batch_beside)}\ninteractive beside: {json.dumps(beside)}", flush=True)
    return summary(args, alone, beside, batch_alone, batch_beside)


def _ratio(a, b) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def summary(args, alone: dict, beside: dict, batch_alone: dict, batch_beside: dict) -> dict:
    ttft_ratio = _ratio(beside["ttft_p99_s"], alone["ttft_p99_s"])
    throughput_ratio = _ratio(tok_s(batch_beside), tok_s(batch_alone))
    errors = alone["errors"] + beside["errors"] + batch_alone["errors"] + batch_beside["errors"]
    return {"benchmark": "priority", "config": args.config, "tier": args.tier, "batch_via": args.batch_via,
            "batch_size": args.batch_size, "batch_max_tokens": args.batch_max_tokens,
            "batch_concurrency": args.batch_concurrency if args.batch_via == "direct" else None,
            "rate_rps": args.rate, "max_tokens": args.max_tokens,
            "ttft_p50_alone_s": alone["ttft_p50_s"], "ttft_p99_alone_s": alone["ttft_p99_s"],
            "ttft_p50_draining_s": beside["ttft_p50_s"], "ttft_p99_draining_s": beside["ttft_p99_s"],
            "ttft_p99_ratio": ttft_ratio,
            "batch_tok_s_alone": tok_s(batch_alone), "batch_tok_s_beside": tok_s(batch_beside),
            "batch_throughput_ratio": throughput_ratio,
            "interactive_requests_alone": alone["requests"], "interactive_requests_draining": beside["requests"],
            "batch_alone": batch_alone, "batch_beside": batch_beside, "errors": errors,
            "goals_met": (errors == 0 and ttft_ratio is not None and ttft_ratio <= MAX_TTFT_RATIO
                          and throughput_ratio is not None and throughput_ratio >= MIN_THROUGHPUT_RATIO)}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="config/tiergate.yaml", help="the stack's config (as `make run`)")
    p.add_argument("--url", help="a stack already running on --config (a `make run`) instead of starting one")
    p.add_argument("--tier", default="medium", help="the tier both kinds of traffic are pinned to")
    p.add_argument("--key", default=os.environ.get("TIERGATE_API_KEY", "unused"),
                   help="tenant API key (default $TIERGATE_API_KEY; the default config is an open policy)")
    add_traffic_args(p)
    p.add_argument("--interactive-requests", type=int, default=60, help="interactive requests measured alone")
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--batch-via", choices=["api", "direct"], default="api",
                   help="api: the gateway's /v1/batches; direct: straight to the tier's workers at batch priority "
                        "(with --url, the stack's TIERGATE_WORKER_KEY must be exported: the workers want it)")
    p.add_argument("--batch-concurrency", type=int, default=8, help="--batch-via direct: requests in flight")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    ensure_worker_key()  # the config names it (the workers' key); a stack started here gets the same
    stack = None if args.url else LocalStack(args.config)
    gateway = args.url.rstrip("/") if args.url else stack.start()
    try:
        result = asyncio.run(run(args, gateway))
    finally:
        if stack is not None:
            stack.stop()
    print(json.dumps(result, separators=(",", ":")))


if __name__ == "__main__":
    main()
