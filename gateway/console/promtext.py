"""Reading Prometheus text: the gateway's own /metrics and each worker's, for the console."""
from __future__ import annotations

import math
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families

Sample = tuple[dict[str, str], float]


def samples(text: str) -> dict[str, list[Sample]]:
    """Sample name (with its _total/_bucket/... suffix) -> [(labels, value)]."""
    out: dict[str, list[Sample]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name].append((s.labels, s.value))
    return out


def total(found: dict[str, list[Sample]], name: str, **match: str) -> float:
    return sum(v for labels, v in found.get(name, ()) if all(labels.get(k) == m for k, m in match.items()))


def by_label(found: dict[str, list[Sample]], name: str, label: str, **match: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for labels, v in found.get(name, ()):
        if all(labels.get(k) == m for k, m in match.items()):
            out[labels.get(label, "")] += v
    return dict(out)


def quantile(found: dict[str, list[Sample]], histogram: str, q: float) -> float | None:
    """histogram_quantile over all series of a histogram (buckets summed), interpolated linearly
    inside the bucket as Prometheus does; None with no observations."""
    buckets: dict[float, float] = defaultdict(float)
    for labels, v in found.get(histogram + "_bucket", ()):
        buckets[float(labels["le"])] += v
    edges = sorted(buckets)
    if not edges or buckets[edges[-1]] <= 0:
        return None
    rank = q * buckets[edges[-1]]
    lower, below = 0.0, 0.0
    for edge in edges:
        count = buckets[edge]
        if count >= rank:
            if math.isinf(edge):
                return lower  # beyond the last finite bucket: its bound is the best estimate
            return lower + (edge - lower) * ((rank - below) / (count - below) if count > below else 1.0)
        lower, below = edge, count
    return lower
