"""TTFT / inter-token / end-to-end latency of one request, into the worker's histograms; the
same readings (time.monotonic()) time the request's queue, prefill and decode spans afterwards."""
from __future__ import annotations

import time

from backends.worker_metrics import WorkerMetrics


class RequestTimer:
    def __init__(self, metrics: WorkerMetrics):
        self.metrics, self.start, self.last = metrics, time.monotonic(), None
        self.first: float | None = None  # the first token
        self.end: float | None = None
        self.finished = False
        self.output_tokens = 0

    def token(self) -> None:
        now = time.monotonic()
        if self.last is None:
            self.first = now
            self.metrics.ttft.labels(self.metrics.model).observe(now - self.start)
        else:
            self.metrics.itl.labels(self.metrics.model).observe(now - self.last)
        self.last = now

    def record_end(self, prompt_tokens: int, output_tokens: int, finish_reason: str | None) -> None:
        self.finished, self.end, self.output_tokens = True, time.monotonic(), output_tokens
        m = self.metrics
        m.e2e.labels(m.model).observe(self.end - self.start)
        m.prompt_tokens.labels(m.model).inc(prompt_tokens)
        m.generation_tokens.labels(m.model).inc(output_tokens)
        m.requests.labels(m.model, finish_reason or "unknown").inc()
