"""Prometheus metrics of one worker process (its own registry, served at /metrics)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from .engine.model.device import gpu_memory

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
TOKEN_GAP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class EngineCollector:
    """Reads the engine's live state at scrape time instead of mirroring it on every step."""

    def __init__(self, engine, model_name: str):
        self.engine = engine
        self.model = model_name

    def collect(self):
        core = self.engine.core
        blocks = core.block_manager
        labels = ["model"]
        for name, doc, value, family in (
            ("tiergate_worker_num_requests_running", "Sequences in the running batch", self.engine.num_running(), GaugeMetricFamily),
            ("tiergate_worker_num_requests_waiting", "Requests queued for admission", self.engine.num_waiting(), GaugeMetricFamily),
            ("tiergate_worker_kv_cache_usage_ratio", "Share of KV blocks in use (0..1)", blocks.usage(), GaugeMetricFamily),
            ("tiergate_worker_kv_cache_blocks", "KV blocks in the pool", blocks.num_blocks, GaugeMetricFamily),
            ("tiergate_worker_prefix_cache_queries", "Prompt tokens looked up in the prefix cache", blocks.prefix_query_tokens, CounterMetricFamily),
            ("tiergate_worker_prefix_cache_hits", "Prompt tokens served from the prefix cache", blocks.prefix_hit_tokens, CounterMetricFamily),
            ("tiergate_worker_preemptions", "Sequences preempted for lack of KV blocks", core.scheduler.num_preemptions, CounterMetricFamily),
        ):
            metric = family(name, doc, labels=labels)
            metric.add_metric([self.model], value)
            yield metric
        yield from self._priorities(core.scheduler)
        yield from self._speculation(core.spec_stats)
        yield from self.gpu_memory_metrics(core.runner)

    def _priorities(self, scheduler):
        for name, doc, values, family in (
            ("tiergate_worker_priority_waiting", "Requests queued for admission, by priority",
             scheduler.waiting_by_priority(), GaugeMetricFamily),
            ("tiergate_worker_priority_scheduled_tokens", "Tokens scheduled into steps, by priority",
             scheduler.scheduled_tokens, CounterMetricFamily),
            ("tiergate_worker_priority_preemptions", "Sequences preempted for lack of KV blocks, by priority",
             scheduler.preemptions, CounterMetricFamily),
        ):
            metric = family(name, doc, labels=["model", "priority"])
            for priority, value in sorted(values.items()):
                metric.add_metric([self.model, priority], value)
            yield metric

    def gpu_memory_metrics(self, runner):
        usage = gpu_memory(runner.model, runner.kv_caches)  # None on CPU: the family is absent there
        if usage is None:
            return
        metric = GaugeMetricFamily("tiergate_worker_gpu_memory_bytes",
                                   "GPU memory: weights, KV pool, and the allocator's peak since start",
                                   labels=["model", "kind"])
        for kind, value in usage.items():
            metric.add_metric([self.model, kind], value)
        yield metric

    def _speculation(self, stats):
        for name, doc, value in (
            ("tiergate_worker_spec_steps", "Draft verifications (one per sequence per step)", stats.steps),
            ("tiergate_worker_spec_draft_tokens", "Draft tokens proposed", stats.draft_tokens),
            ("tiergate_worker_spec_accepted_tokens", "Draft tokens accepted by the target", stats.accepted_tokens),
        ):
            metric = CounterMetricFamily(name, doc, labels=["model"])
            metric.add_metric([self.model], value)
            yield metric
        for name, doc, values in (
            ("tiergate_worker_spec_drafted_at_position", "Draft tokens proposed, by position in the draft", stats.drafted_at),
            ("tiergate_worker_spec_accepted_at_position", "Draft tokens accepted, by position in the draft", stats.accepted_at),
        ):
            metric = CounterMetricFamily(name, doc, labels=["model", "position"])
            for position, value in enumerate(values):
                metric.add_metric([self.model, str(position)], value)
            yield metric


class WorkerMetrics:
    def __init__(self, engine, model_name: str):
        self.registry = CollectorRegistry()
        self.model = model_name
        self.ttft = Histogram("tiergate_worker_time_to_first_token_seconds", "Arrival to first token",
                              ["model"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.itl = Histogram("tiergate_worker_inter_token_latency_seconds", "Gap between consecutive output tokens",
                             ["model"], buckets=TOKEN_GAP_BUCKETS, registry=self.registry)
        self.e2e = Histogram("tiergate_worker_e2e_request_latency_seconds", "Arrival to last token",
                             ["model"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.prompt_tokens = Counter("tiergate_worker_prompt_tokens", "Prompt tokens of finished requests",
                                     ["model"], registry=self.registry)
        self.generation_tokens = Counter("tiergate_worker_generation_tokens", "Generated tokens",
                                         ["model"], registry=self.registry)
        self.requests = Counter("tiergate_worker_requests", "Finished requests by finish reason",
                                ["model", "finish_reason"], registry=self.registry)
        self.registry.register(EngineCollector(engine, model_name))
