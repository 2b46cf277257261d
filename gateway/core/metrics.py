"""Prometheus metrics. Labels are bounded: tenant, tier, model, backend — never keys or ids.

With several gateway processes (`--workers N`), the launcher sets PROMETHEUS_MULTIPROC_DIR
before any process imports prometheus_client, and /metrics aggregates all processes
(counters and histograms summed, gauges per `multiprocess_mode`). With one process the
default registry is served as is.
"""
from __future__ import annotations

import os

import prometheus_client
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, REGISTRY, generate_latest, multiprocess
from prometheus_client.metrics_core import Metric

_LATENCY = (.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120)
_PER_TOKEN = (.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1)
_FAST = (.00002, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .05)


class _ChildrenByValues:
    """`labels(...)` that remembers each child by the values it was given: prometheus_client's own
    checks, converts each value to str and takes a lock on every call, several times a request.
    Children are never removed here (label values are bounded), so a remembered one stays valid."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._children_by_values: dict[tuple, object] = {}

    def labels(self, *values, **named):
        if named:
            return super().labels(*values, **named)
        try:
            return self._children_by_values[values]
        except KeyError:
            child = self._children_by_values[values] = super().labels(*values)
            return child
        except TypeError:  # an unhashable value: prometheus_client takes its str()
            return super().labels(*values)


class Counter(_ChildrenByValues, prometheus_client.Counter):
    pass


class Gauge(_ChildrenByValues, prometheus_client.Gauge):
    pass


class Histogram(_ChildrenByValues, prometheus_client.Histogram):
    pass


class _Metrics:
    def __init__(self):
        self.requests = Counter("tiergate_requests_total", "Client requests answered",
                                ["tenant", "tier", "model", "status"])
        self.ttft = Histogram("tiergate_ttft_seconds", "Time to first token as the client sees it",
                              ["tier", "model"], buckets=_LATENCY)
        self.tpot = Histogram("tiergate_time_per_output_token_seconds", "Streaming time per output token",
                              ["tier", "model"], buckets=_PER_TOKEN)
        self.e2e = Histogram("tiergate_request_duration_seconds", "End-to-end request time",
                             ["tier", "model"], buckets=_LATENCY)
        self.overhead = Histogram("tiergate_overhead_seconds", "Time spent in the gateway itself",
                                  ["tier"], buckets=_FAST)
        self.tokens = Counter("tiergate_tokens_total", "Tokens served", ["tenant", "tier", "model", "direction"])
        self.cost = Counter("tiergate_cost_usd_total", "Cost of served tokens at the tier's prices",
                            ["tenant", "tier", "model"])
        self.upstream_errors = Counter("tiergate_upstream_errors_total", "Failed upstream attempts",
                                       ["tier", "backend", "kind"])
        self.retries = Counter("tiergate_retries_total", "Attempts retried on another worker", ["tier"])
        self.retries_refused = Counter("tiergate_retries_refused_total", "Retries the retry budget refused",
                                       ["tier"])
        self.escalations = Counter("tiergate_escalations_total", "Requests moved to the next tier up",
                                   ["from_tier", "to_tier"])
        self.shape_escalations = Counter("tiergate_shape_escalations_total", "Structured answers cut or invalid, "
                                         "asked again of the next tier up", ["from_tier", "to_tier", "why"])
        self.cascade = Counter("tiergate_cascade_total", "Cascaded requests: the first tier's answer kept, "
                               "escalated one tier up, or the cascade skipped, and why", ["tier", "outcome", "reason"])
        self.cascade_held = Histogram("tiergate_cascade_held_seconds", "How much later a cascaded stream's first "
                                      "token left the gateway than the first tier's came", ["tier", "outcome"],
                                      buckets=_LATENCY)
        self.affinity = Counter("tiergate_affinity_total", "Prefix-affinity outcomes", ["tier", "result"])
        self.classifier = Histogram("tiergate_classifier_seconds", "Classifier latency", ["classifier"],
                                    buckets=_FAST)
        self.redis_errors = Counter("tiergate_redis_errors_total", "Redis operations that failed", ["op"])
        self.reloads = Counter("tiergate_config_reloads_total", "Config reload attempts", ["result"])
        self.stream_cut = Counter("tiergate_streams_cut_total", "Streams ended by an upstream failure",
                                  ["tier", "backend"])
        self.batch_lines = Counter("tiergate_batch_lines_total", "Batch lines finished, or put off for later "
                                   "(rate limit, budget, no worker)", ["outcome"])
        self.cache = Counter("tiergate_cache_total", "Response cache: requests served from it (hit; semantic: a similar prompt's answer), looked up "
                             "and not found (miss), not eligible or told not to read it (bypass); answers "
                             "not kept (too_large, queue_full, stale_identity: its worker is not the model its card "
                             "said) and entries evicted", ["tenant", "tier", "result"])
        self.cache_saved = Counter("tiergate_cache_saved_usd_total", "The tier's price of answers served from the "
                                   "cache, less what they were billed", ["tenant", "tier"])
        self.backend_up = Gauge("tiergate_backend_up", "1 if the backend is eligible for traffic",
                                ["backend"], multiprocess_mode="max")


METRICS = _Metrics()


class _WithoutTenants:
    """A registry's families less every sample labelled with a tenant (what /metrics shows
    without the admin key: gateway/admin/view.py)."""

    def __init__(self, registry):
        self.registry = registry

    def collect(self):
        for family in self.registry.collect():
            kept = [s for s in family.samples if "tenant" not in s.labels]
            if kept:
                copy = Metric(family.name, family.documentation, family.type, family.unit)
                copy.samples = kept
                yield copy


def render(with_tenants: bool = True) -> tuple[bytes, str]:
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry if with_tenants else _WithoutTenants(registry)), CONTENT_TYPE_LATEST
