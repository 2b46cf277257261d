"""One open-loop load run: Poisson arrivals at a fixed rate whatever the latency (a slow gateway
gets a queue, not fewer arrivals), mixed over models and keys, streaming and not; and its
summary per tier (x-tiergate-tier answer header)."""
from __future__ import annotations

import asyncio
import json
import random
import time
from collections import defaultdict

import aiohttp

from measure.stats import latency_stats, streamed_ttfts

PROMPTS = ["What is 2+2?", "Translate 'good morning' into French.",
           "Summarise the causes of the French Revolution in three sentences.",
           "Write a Python function that merges two sorted lists, with tests. " * 3,
           "Explain the proof that there are infinitely many primes, step by step, then generalise it. " * 6]


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


CHAT_ENDPOINT = "/v1/chat/completions"


async def models_of(url: str, key: str | None) -> list[str]:
    """Every chat tier plus the classifier-routed "auto" model (the route most real traffic takes);
    embeddings tiers answer another endpoint, so they are left out."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{url}/v1/models", headers=headers) as r:
            r.raise_for_status()
            return [m["id"] for m in (await r.json())["data"]
                    if m.get("tiergate", {}).get("kind") in ("tier", "auto")
                    and CHAT_ENDPOINT in m["tiergate"].get("endpoints", ())]
