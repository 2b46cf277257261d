"""How much latency the gateway adds, and how many requests/s one gateway process serves.

`python -m benchmarks.gateway [--peer litellm]` starts a fake OpenAI upstream on loopback and
one gateway process in front of it (classification on: model "auto"), then, in one run:
- added latency: the same request sent alternately to the upstream directly and through the
  gateway, one at a time; added = p50/p99 of (gateway) minus the same percentile of (direct);
- streamed TTFT added: the same, for the time to the first content chunk of a stream;
- the same added latency for /v1/embeddings and for streamed /v1/messages (gateway_dropin.py);
- requests/s of the gateway process at saturation (wrk when installed, else an aiohttp loop).
With --tenants the gateway runs with a tenant (its key checked, admission reserving against a hard
budget and rate limits in Redis, settlement after each answer): what tenancy costs. The run then
has its own redis-server, stores --keys API-managed keys through the admin API first (so the
head gateway authenticates among them), starts a second head replica, and reports the create and
revoke propagation between the two and a flood of unknown keys' Redis commands per request
(benchmarks/tenant_keys.py). With
--against REF a second gateway is started from that commit (a detached git worktree) on the same
upstream and both are measured in two alternating rounds in this run: `against` beside the head.
With --peer litellm, LiteLLM's proxy (installed into .cache/litellm-venv on first use) is
measured the same way on the same upstream. With --tracing on the gateway exports its requests'
spans (all of them, or --trace-sample-ratio) to a local OTLP/HTTP sink (launcher/otlp_sink.py):
what tracing costs. With --redis-modes: the gateway on one Redis, a Sentinel group and a Cluster
instead (benchmarks/redis_modes.py).
Prints one JSON object as its last line.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp

from benchmarks.gateway_calls import BODY, one_call, wait_http
from benchmarks.gateway_dropin import dropin_latency
from benchmarks.gateway_peers import start_litellm
from benchmarks import tenant_keys
from benchmarks.load import closed_loop_rps, wrk_rps
from launcher import commands
from launcher.group import ProcessGroup, clean_env
from launcher.processes import free_port, start_persistent_redis
from policies.keys import hash_key
from measure.stats import percentile

ROOT = Path(__file__).resolve().parents[1]
TENANT_KEY = "sk-bench-tenant"
async def added_latency(session, direct: str, target: str, headers: dict, n: int, stream: bool,
                        body: dict) -> dict:
    direct_s, target_s = [], []
    direct_body = dict(body, model="bench-model")
    for _ in range(min(50, n)):  # warm both paths
        await one_call(session, direct, direct_body, {}, stream)
        await one_call(session, target, body, headers, stream)
    for _ in range(n):  # alternate, so both see the same machine noise
        direct_s.append(await one_call(session, direct, direct_body, {}, stream))
        target_s.append(await one_call(session, target, body, headers, stream))
    direct_s.sort()
    target_s.sort()
    return {q: (percentile(target_s, q) - percentile(direct_s, q)) * 1000 for q in (50, 99)} | {
        "direct_p50_ms": percentile(direct_s, 50) * 1000, "via_p50_ms": percentile(target_s, 50) * 1000}


async def measure(session, upstream: str, base: str, headers: dict, n: int, rps_seconds: float,
                  model: str = "auto") -> dict:
    path = "/v1/chat/completions"
    body = dict(BODY, model=model)
    whole = await added_latency(session, upstream + path, base + path, headers, n, False, body)
    ttft = await added_latency(session, upstream + path, base + path, headers, max(n // 4, 50), True, body)
    rps = wrk_rps(base + path, json.dumps(dict(body, stream=False)), headers, rps_seconds) if shutil.which("wrk") \
        else await closed_loop_rps(base + path, body, headers, rps_seconds)
    return {"added_ms_p50": round(whole[50], 3), "added_ms_p99": round(whole[99], 3),
            "stream_ttft_added_ms_p50": round(ttft[50], 3), "rps": round(rps, 1),
            "direct_p50_ms": round(whole["direct_p50_ms"], 3), "via_p50_ms": round(whole["via_p50_ms"], 3)}


def gateway_config(upstream: str, path: Path, otlp_sink: str | None = None, sample_ratio: float = 1.0,
                   tenants: bool = False, redis_url: str | None = None) -> None:
    tracing = {"tracing": {"enabled": True, "otlp_endpoint": otlp_sink, "sample_ratio": sample_ratio}} \
        if otlp_sink else {}
    # limits far above what the run sends: every request is checked, reserved and settled, none refused
    tenancy = {"tenants": {"bench": {"keys": [{"id": "k1", "sha256": hash_key(TENANT_KEY)}],
                                     "rate_limits": {"requests_per_minute": 10_000_000,
                                                     "tokens_per_minute": 10_000_000_000},
                                     "budgets": {"daily_usd": {"hard": 1_000_000.0}}}},
               "policy": {"admin_key_sha256": hash_key(tenant_keys.ADMIN_KEY)},
               "redis": {"url": redis_url}} if tenants else {}
    path.write_text(json.dumps({  # JSON is YAML
        "tiers": [{"name": "bench", "level": 1, "model": "bench-model", "price_per_mtok": {"input": 0.1, "output": 0.2},
                   "workers": [{"url": upstream}]}],
        "embeddings": [{"name": "bench-embed", "level": 1, "model": "bench-embed-model",
                        "price_per_mtok": {"input": 0.02, "output": 0.0}, "workers": [{"url": upstream}]}],
        "health": {"interval_s": 5.0}, **tracing, **tenancy}))


def start_against(group: ProcessGroup, ref: str, config: Path, port: int, tmp: Path) -> ProcessGroup:
    """A gateway process run from commit `ref` (a detached worktree under tmp), for side-by-side runs."""
    tree = tmp / "against"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), ref], check=True)
    against = ProcessGroup(cwd=tree)
    against.spawn("gateway-against", commands.gateway_processes(config, port, workers=1),
                  env=clean_env(PYTHONPATH=str(tree)))
    group.procs.extend(against.procs)
    return against


def remove_against(tmp: Path) -> None:
    tree = tmp / "against"
    if tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


async def run(args) -> dict:
    up_port, gw_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    tmp = Path(tempfile.mkdtemp(prefix="tiergate-bench-"))
    group = ProcessGroup()
    try:
        group.spawn("upstream", commands.fake_upstream(up_port, "--chunks", "8"))
        sink = None
        if args.tracing == "on":
            sink_port = free_port()
            sink = f"http://127.0.0.1:{sink_port}"
            group.spawn("otlp-sink", commands.otlp_sink(sink_port))
            group.wait_port(sink_port)
        redis_url = None
        if args.tenants:  # its own Redis: the keys stored, and the commands counted, are this run's alone
            redis_port = free_port()
            group.procs.append(start_persistent_redis(redis_port, tmp))
            redis_url = f"redis://127.0.0.1:{redis_port}/0"
        gateway_config(upstream, tmp / "gateway.yaml", sink, args.trace_sample_ratio, args.tenants, redis_url)
        group.spawn("gateway", commands.gateway_processes(tmp / "gateway.yaml", gw_port, workers=1))
        headers = {"Authorization": f"Bearer {TENANT_KEY}"} if args.tenants else {}
        if args.against:
            against_port = free_port()
            start_against(group, args.against, tmp / "gateway.yaml", against_port, tmp)
        connector = aiohttp.TCPConnector(limit=16)
        async with aiohttp.ClientSession(connector=connector) as session:
            await wait_http(session, upstream + "/health")
            await wait_http(session, f"http://127.0.0.1:{gw_port}/health")
            keys = await stored_keys(session, group, tmp / "gateway.yaml", gw_port, redis_url, args) \
                if args.tenants else {}
            if args.against:
                await wait_http(session, f"http://127.0.0.1:{against_port}/health")
                return await side_by_side(session, upstream, {"head": gw_port, "against": against_port}, headers,
                                          args) | {"against_ref": args.against, "tenants": args.tenants} | keys
            result = await measure(session, upstream, f"http://127.0.0.1:{gw_port}", headers, args.n, args.seconds)
            result |= keys
            result["rps_tool"] = "wrk" if shutil.which("wrk") else "aiohttp"
            result["tracing"] = args.tracing if sink is None else f"on, sample_ratio {args.trace_sample_ratio}"
            if sink:  # what arrived while measuring (the last batch leaves when the gateway stops)
                async with session.get(sink + "/stats") as response:
                    result["otlp_spans_received"] = (await response.json())["received"]
            # the same without classification, to show what the classifier costs
            result["explicit_tier"] = await measure(session, upstream, f"http://127.0.0.1:{gw_port}", headers,
                                                    args.n // 2, args.seconds / 2, model="bench")
            # /v1/embeddings and streamed /v1/messages (benchmarks/gateway_dropin.py)
            result["dropin"] = await dropin_latency(one_call, session, upstream, f"http://127.0.0.1:{gw_port}", headers,
                                                    max(args.n // 4, 50), BODY)
            result["upstream_alone_rps"] = round(wrk_rps(upstream + "/v1/chat/completions", json.dumps(
                dict(BODY, model="bench-model")), {}, args.seconds / 2), 1) if shutil.which("wrk") else None
            if args.peer == "litellm":
                peer_port = free_port()
                peer, headers = start_litellm(upstream, peer_port, tmp, ROOT)
                group.procs.append(peer)
                await wait_http(session, f"http://127.0.0.1:{peer_port}/health/liveliness", timeout_s=240)
                result["litellm"] = await measure(session, upstream, f"http://127.0.0.1:{peer_port}", headers,
                                                  args.n, args.seconds)
                ours, theirs = result["added_ms_p50"], result["litellm"]["added_ms_p50"]
                result["litellm_added_p50_ratio"] = round(theirs / ours, 1) if ours > 0 else None
    finally:
        group.stop()
        remove_against(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    return result


async def stored_keys(session, group: ProcessGroup, config: Path, head_port: int, redis_url: str, args) -> dict:
    """--keys keys stored through the head's admin API, a second head replica on the same Redis,
    propagation between the two, and an unknown-key flood's Redis commands."""
    head = f"http://127.0.0.1:{head_port}"
    stored_s = await tenant_keys.store_keys(session, head, args.keys)
    other_port = free_port()
    group.spawn("gateway-replica", commands.gateway_serve(config, other_port))
    other = f"http://127.0.0.1:{other_port}"
    await wait_http(session, other + "/health")
    return {"keys_stored": args.keys, "keys_store_s": round(stored_s, 1),
            "propagation": await tenant_keys.propagation(session, head, other, args.propagation_rounds),
            "unknown_key_flood": await tenant_keys.unknown_key_flood(session, head, redis_url, 2000)}


async def side_by_side(session, upstream: str, ports: dict[str, int], headers: dict, args) -> dict:
    """Each gateway measured `--rounds` times, alternating, so both see the same machine noise; per
    gateway the rounds, the best of them (the lower added p50, the higher requests/s) and their
    medians (on 2 cores one round's p50 moves by a millisecond; more rounds give a steadier median)."""
    rounds: dict[str, list[dict]] = {name: [] for name in ports}
    for i in range(args.rounds):
        print(f"[gateway] round {i + 1}/{args.rounds}", file=sys.stderr, flush=True)
        for name, port in ports.items():
            rounds[name].append(await measure(session, upstream, f"http://127.0.0.1:{port}", headers, args.n,
                                              args.seconds))
    best = {name: {"added_ms_p50": min(r["added_ms_p50"] for r in runs), "rps": max(r["rps"] for r in runs)}
            for name, runs in rounds.items()}
    median = {name: {"added_ms_p50": statistics.median(r["added_ms_p50"] for r in runs),
                     "rps": statistics.median(r["rps"] for r in runs)} for name, runs in rounds.items()}
    return {"rounds": rounds, "best": best, "median": median}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer", choices=["litellm"], default=None)
    parser.add_argument("--tenants", action="store_true",
                        help="the gateway authenticates a tenant and reserves and settles every request in Redis")
    parser.add_argument("--keys", type=int, default=10_000,
                        help="with --tenants: API-managed keys stored before measuring")
    parser.add_argument("--propagation-rounds", type=int, default=200,
                        help="with --tenants: keys created and revoked to time propagation between two replicas")
    parser.add_argument("--against", metavar="REF", default=None,
                        help="also run a gateway from this git commit and measure both, alternating")
    parser.add_argument("--rounds", type=int, default=2, help="with --against: alternating rounds per gateway")
    parser.add_argument("-n", type=int, default=1000, help="requests per latency series")
    parser.add_argument("--seconds", type=float, default=8.0, help="duration of the requests/s run")
    parser.add_argument("--tracing", choices=["off", "on"], default="off",
                        help="on: the gateway exports its spans to a local OTLP/HTTP sink")
    parser.add_argument("--trace-sample-ratio", type=float, default=1.0,
                        help="with --tracing on: the share of requests traced (the benchmark sends no traceparent)")
    parser.add_argument("--redis-modes", action="store_true",
                        help="instead: the gateway on single Redis, Sentinel and Cluster side by side, and the "
                             "seconds from a master killed to a request served again (benchmarks/redis_modes.py)")
    args = parser.parse_args()
    if args.redis_modes:
        from benchmarks.redis_modes import measure as redis_modes

        print(json.dumps(redis_modes(args.n, args.seconds)))
        return
    result = asyncio.run(run(args))
    result["cpu_count"] = os.cpu_count()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
