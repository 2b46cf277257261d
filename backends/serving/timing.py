"""TTFT / inter-token / end-to-end latency of one request, into the worker's histograms."""
from __future__ import annotations

import time

from backends.worker_metrics import WorkerMetrics


class RequestTimer:
    def __init__(self, metrics: WorkerMetrics):
        self.metrics, self.start, self.last = metrics, time.monotonic(), None
        self.finished = False

    def token(self) -> None:
        now = time.monotonic()
        if self.last is None:
            self.metrics.ttft.labels(self.metrics.model).observe(now - self.start)
        else:
            self.metrics.itl.labels(self.metrics.model).observe(now - self.last)
        self.last = now

    def finish(self, prompt_tokens: int, output_tokens: int, finish_reason: str | None) -> None:
        self.finished = True
        m = self.metrics
        m.e2e.labels(m.model).observe(time.monotonic() - self.start)
        m.prompt_tokens.labels(m.model).inc(prompt_tokens)
        m.generation_tokens.labels(m.model).inc(output_tokens)
        m.requests.labels(m.model, finish_reason or "unknown").inc()
