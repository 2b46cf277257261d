"""The quality view: sampled failure rate per tier over time, the similarity distribution,
threshold changes and classifier swaps on the time axis, and the current shift."""
from __future__ import annotations

import time

from ..quality.monitor import top_tier

RECENT_SAMPLES = 2000
BUCKET_S = 60
WINDOW_MINUTES = 60
SIMILARITY_BINS = 10


def _at_s(sample: dict) -> float | None:
    try:
        return float(sample["time"])  # unix seconds, as the monitor writes it
    except (KeyError, TypeError, ValueError):
        return None


def failure_series(samples: list[dict], tiers: list[str], now_s: float) -> dict:
    """Per minute of the last WINDOW_MINUTES (unix seconds at its start) and tier: answers
    sampled, and the share that failed (null in a minute with no sample)."""
    last = int(now_s // BUCKET_S * BUCKET_S)
    minutes = list(range(last - (WINDOW_MINUTES - 1) * BUCKET_S, last + BUCKET_S, BUCKET_S))
    buckets: dict[int, dict[str, list[int]]] = {m: {} for m in minutes}
    for s in samples:
        at = _at_s(s)
        slot = buckets.get(int(at // BUCKET_S * BUCKET_S)) if at is not None else None
        if slot is None or s.get("tier") not in tiers:
            continue
        counts = slot.setdefault(s["tier"], [0, 0])
        counts[0] += 1
        counts[1] += s.get("verdict") == "fail"
    return {"minutes": minutes,
            "failure_rate": {t: [round(buckets[m][t][1] / buckets[m][t][0], 4) if t in buckets[m] else None
                                 for m in minutes] for t in tiers},
            "samples": {t: [buckets[m].get(t, [0, 0])[0] for m in minutes] for t in tiers}}


def similarity_histogram(samples: list[dict]) -> dict:
    counts = [0] * SIMILARITY_BINS
    for s in samples:
        try:
            sim = float(s["similarity"])
        except (KeyError, TypeError, ValueError):
            continue
        counts[min(SIMILARITY_BINS - 1, max(0, int(sim * SIMILARITY_BINS)))] += 1
    return {"bin_edges": [round(i / SIMILARITY_BINS, 2) for i in range(SIMILARITY_BINS + 1)], "counts": counts}


async def quality(services) -> dict:
    monitor, config = services.sinks.quality, services.config
    top = top_tier(config)
    tiers = [t.name for t in config.tiers if t.level < top.level]  # the top tier is the reference, never judged
    body = {"object": "tiergate.console.quality", "enabled": monitor.config.enabled,
            "sampling_rate": monitor.config.sampling_rate, "top_tier": top.name, "judged_tiers": tiers,
            **monitor.controller.as_view(),
            "swaps": list(monitor.swapper.history), "router": monitor.learner.status(),
            "cascade": monitor.cascade.status(), "changes": [], "series": None,
            "similarity": None}
    if monitor.store is None:
        return body
    samples = await monitor.store.recent_samples(RECENT_SAMPLES)
    body["series"] = failure_series(samples, tiers, time.time())
    body["similarity"] = similarity_histogram(samples)
    body["changes"] = await monitor.store.recent_changes(50)
    return body
