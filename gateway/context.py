"""Per-request bookkeeping: ids, the routing outcome and timing for the x-tiergate-* headers."""
from __future__ import annotations

import time

from webwire.errors import request_id_from
from webwire.tracing import current_span


class RequestContext:
    __slots__ = ("start", "request_id", "tenant", "tier", "model", "backend", "upstream_s", "span")

    def __init__(self, client_request_id: str | None):
        self.start = time.perf_counter()
        self.request_id = request_id_from(client_request_id)
        self.tenant = "none"
        self.tier = "none"
        self.model = "none"
        self.backend = "none"
        self.upstream_s = 0.0  # time spent waiting on upstreams, excluded from the overhead
        self.span = current_span()  # the request's server span when tracing is on, else None

    def overhead_ms(self) -> float:
        return max(0.0, (time.perf_counter() - self.start - self.upstream_s) * 1000.0)

    def headers(self) -> dict[str, str]:
        return {
            "x-request-id": self.request_id,
            "x-tiergate-tier": self.tier,
            "x-tiergate-model": self.model,
            "x-tiergate-backend": self.backend,
            "x-tiergate-overhead-ms": f"{self.overhead_ms():.3f}",
        }
