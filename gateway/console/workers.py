"""The workers view: what the gateway knows of each upstream (health, breaker, load) and what
the worker's own /metrics says (queue, batch, KV cache, prefix cache, latency, speculation).

Foreign upstreams (vLLM, Ollama, ...) publish other metric names; their engine figures are
simply absent (null) and the gateway's own columns still show.
"""
from __future__ import annotations

import asyncio
import time

import aiohttp

from ..core.transport import get_small
from . import promtext

MAX_METRICS_BYTES = 4 << 20  # a worker's /metrics page larger than this is not read


def _first(found, *names: str) -> float | None:
    for name in names:
        if name in found:
            return promtext.total(found, name)
    return None


def _ratio(part: float | None, whole: float | None) -> float | None:
    return round(part / whole, 4) if part is not None and whole else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 2)


def engine_figures(found) -> dict:
    """The figures a Tiergate worker publishes (tiergate_worker_*), read from its /metrics."""
    ttft, tpot = "tiergate_worker_time_to_first_token_seconds", "tiergate_worker_inter_token_latency_seconds"
    embed = "tiergate_worker_embedding_seconds"
    return {
        "running": _first(found, "tiergate_worker_num_requests_running"),
        "waiting": _first(found, "tiergate_worker_num_requests_waiting"),
        "kv_cache_usage": _first(found, "tiergate_worker_kv_cache_usage_ratio"),
        "prefix_cache_hit_rate": _ratio(_first(found, "tiergate_worker_prefix_cache_hits_total"),
                                        _first(found, "tiergate_worker_prefix_cache_queries_total")),
        "ttft_ms_p50": _ms(promtext.quantile(found, ttft, 0.5)),
        "ttft_ms_p99": _ms(promtext.quantile(found, ttft, 0.99)),
        "tpot_ms_p50": _ms(promtext.quantile(found, tpot, 0.5)),
        "tpot_ms_p99": _ms(promtext.quantile(found, tpot, 0.99)),
        "spec_acceptance": _ratio(_first(found, "tiergate_worker_spec_accepted_tokens_total"),
                                  _first(found, "tiergate_worker_spec_draft_tokens_total")),
        "embed_ms_p50": _ms(promtext.quantile(found, embed, 0.5)),
        "embed_ms_p99": _ms(promtext.quantile(found, embed, 0.99)),
    }


async def _scrape(transport, backend, timeout_s: float) -> dict | None:
    try:
        _, raw = await get_small(transport, backend.url + "/metrics", backend.auth_headers, timeout_s,
                                      MAX_METRICS_BYTES)
        if raw is None:
            return None
        return engine_figures(promtext.samples(raw.decode("utf-8", "replace")))
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError, UnicodeDecodeError):
        return None


async def workers(services) -> dict:
    config = services.config
    backends = list(services.upstreams.pools.backends.values())
    tiers_of: dict[str, list[str]] = {}
    for tier in (*config.tiers, *config.embedding_tiers):
        for spec in tier.workers:
            tiers_of.setdefault(spec.url, []).append(tier.name)
    scraped = await asyncio.gather(*(_scrape(services.transport, b, config.health.timeout_s) for b in backends))
    now = time.monotonic()
    rows = [{"worker": b.address, "name": b.label, "url": b.url, "tiers": tiers_of.get(b.url, []), "healthy": b.healthy,
             "breaker": b.breaker_state(now), "in_flight_here": b.outstanding, "metrics_read": figures is not None,
             **(figures or engine_figures({}))}
            for b, figures in zip(backends, scraped)]
    return {"object": "tiergate.console.workers", "workers": rows}
