"""The exact response cache's cost on the request path and what it saves, on traces with repeat
rates of 0, 10, 30 and 50%: `python -m benchmarks.cache [--requests 2000] [--semantic]`.

Each trace is a sequence of temperature-0 chat requests of one tenant; with probability r a
request repeats an earlier one (chosen uniformly), else it is new. The cache runs as the request
path runs it (gateway/cache/: plan, lookup against the shared Redis, replay of a hit, the
synchronous part of keeping a miss's answer; the write itself runs after the answer and is
awaited between requests so that a later repeat finds it), around requests built by the
gateway's own `build_request`. Answers are 1 KB of text with 300 prompt and 256 completion
tokens, priced at the tier's $3 / $15 per million and billed $0 on a hit.

Reported per trace: hit rate, cost saved (USD and share of the uncached cost), the p50 the
cache adds to a miss (key, Redis lookup, scheduling the write) and the p50 of a whole hit
(key, lookup, replay of the 1 KB answer). Goals (issue 59): a miss adds <= 0.2 ms, a hit takes
<= 1 ms. `--semantic` turns the tenant's semantic cache on: a miss then also pays its probe (the
answer-bearing fingerprint, the router's vector, the index lookup); every question here is new
in content, so it never hits. The last line is one JSON object."""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
import uuid
from types import SimpleNamespace

RATES = (0.0, 0.1, 0.3, 0.5)
PRICE = (3.0, 15.0)
PROMPT_TOKENS, COMPLETION_TOKENS = 300, 256


def _answer(text: str) -> bytes:
    return json.dumps({"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS,
                                 "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS}}).encode()


def _services(prefix: str, semantic: bool):
    import redis.asyncio as aioredis

    from gateway.config import parse_config
    from gateway.core.classify import ClassifierSlot, PromptLengthClassifier
    from gateway.core.policy_seam import OpenPolicy
    from gateway.core.services import assemble
    from gateway.core.transport import http_transport
    from gateway.quality.monitor import QualityMonitor
    from launcher.processes import SHARED_REDIS

    doc = {"tiers": [{"name": "small", "level": 1, "model": "m", "workers": [{"url": "http://unused.test"}],
                      "price_per_mtok": {"input": PRICE[0], "output": PRICE[1]}}],
           "redis": {"url": SHARED_REDIS, "key_prefix": prefix}, "cache": {"enabled": True},
           "policy": {"defaults": {"cache": {"semantic": {"enabled": semantic}}}}}
    config, slot = parse_config(doc), ClassifierSlot(PromptLengthClassifier())
    quality = QualityMonitor(lambda: config, slot, None)  # built, never started: it samples nothing
    return assemble(config, slot, quality, http_transport(None, 1.0, 1.0), OpenPolicy(),
                    aioredis.from_url(SHARED_REDIS))  # no worker is called


async def _trace(services, rate: float, requests: int, seed: int) -> dict:
    from gateway.api.handlers import build_request
    from gateway.cache.controls import Controls
    from gateway.cache.hit import serve_hit
    from gateway.core.context import RequestContext
    from gateway.core.relay import Delivery, Outcome
    from gateway.core.request import Call
    from gateway.core.usage import Usage

    rng = random.Random(seed)
    tenant = services.sinks.policy.authenticate(None)
    cache, asked = services.cache, []
    hit_ms, miss_ms, saved, total = [], [], 0.0, 0.0
    cost = (PROMPT_TOKENS * PRICE[0] + COMPLETION_TOKENS * PRICE[1]) / 1e6
    for i in range(requests):
        question = rng.choice(asked) if asked and rng.random() < rate else f"question {i} {uuid.uuid4().hex}"
        asked.append(question)
        body = {"model": "small", "temperature": 0, "messages": [{"role": "user", "content": question}]}
        request = build_request(services, Call(RequestContext.begin({}), tenant, "chat", body))
        total += cost
        started = time.perf_counter()
        plan = cache.plan(request, Controls())
        found = await cache.find(request, plan)
        if found.entry is not None:
            await serve_hit(request, found.entry, Delivery(), found.result)
            hit_ms.append((time.perf_counter() - started) * 1000)
            saved += cost
            continue
        looked = time.perf_counter()
        answer = _answer(("x" * 1000) + question[:20])  # the worker's answer, not the cache's time
        tier = request.route.tier
        outcome = Outcome("chat", False, tier, 1, SimpleNamespace(response=SimpleNamespace(status=200, headers={}), body=answer),
                          Usage(PROMPT_TOKENS, COMPLETION_TOKENS, True), request.id, cut=False, stream_error=False)
        kept_from = time.perf_counter()
        cache.keep(request, plan, outcome, None, found.probe)
        miss_ms.append((looked - started + time.perf_counter() - kept_from) * 1000)
        await cache.writes.drain()
    return {"repeat_rate": rate, "requests": requests, "hit_rate": round(len(hit_ms) / requests, 4),
            "cost_usd": round(total, 4), "cost_saved_usd": round(saved, 4),
            "cost_saved_share": round(saved / total, 4) if total else 0.0,
            "hit_ms_p50": round(statistics.median(hit_ms), 4) if hit_ms else None,
            "miss_added_ms_p50": round(statistics.median(miss_ms), 4) if miss_ms else None,
            "hits": hit_ms, "misses": miss_ms}


async def _measure(requests: int, semantic: bool) -> dict:
    from launcher.processes import delete_prefix

    prefix = f"bench-cache:{uuid.uuid4().hex[:8]}:"
    services = _services(prefix, semantic)
    traces = []
    try:
        for n, rate in enumerate(RATES):
            traces.append(await _trace(services, rate, requests, seed=n))
            print(json.dumps({k: v for k, v in traces[-1].items() if k not in ("hits", "misses")}), flush=True)
    finally:
        await services.cache.store.redis.aclose()
        delete_prefix(prefix)
    hits = [ms for t in traces for ms in t.pop("hits")]
    misses = [ms for t in traces for ms in t.pop("misses")]
    return {"benchmark": "cache", "semantic": semantic, "answer_bytes": 1024, "requests_per_trace": requests,
            "hit_ms_p50": round(statistics.median(hits), 4), "miss_added_ms_p50": round(statistics.median(misses), 4),
            "hit_rate": {str(int(t["repeat_rate"] * 100)): t["hit_rate"] for t in traces},
            "cost_saved_share": {str(int(t["repeat_rate"] * 100)): t["cost_saved_share"] for t in traces},
            "goals": {"miss_added_ms_p50": 0.2, "hit_ms_p50": 1.0}, "traces": traces}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per trace")
    parser.add_argument("--semantic", action="store_true", help="the tenant's semantic cache on (its probe on a miss)")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(_measure(args.requests, args.semantic))))


if __name__ == "__main__":
    main()
