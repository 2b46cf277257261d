"""Per-request bookkeeping that never changes once the request arrives (its id, its start time
and its trace span), the x-tiergate-* headers an answer carries, built from what it came to,
and the typed key under which each request holds its context (the process state's key is
with the state, state.py)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from aiohttp import web

from webwire.errors import bounded_client_id, new_request_id
from webwire.tracing import current_span

TIER, MODEL, BACKEND, OVERHEAD = "x-tiergate-tier", "x-tiergate-model", "x-tiergate-backend", "x-tiergate-overhead-ms"
CLIENT_REQUEST_ID = "x-client-request-id"
CACHE = "x-tiergate-cache"  # hit, semantic, miss or bypass: what the response cache did for this answer
SERVED_FROM_CACHE = ("hit", "semantic")  # the same request's answer, or a similar prompt's (gateway/cache/)


@dataclass(frozen=True, slots=True)
class RequestContext:
    request_id: str  # the gateway's own: the billing and idempotency id, never a client's
    start: float = field(default_factory=time.perf_counter)
    span: object = field(default_factory=current_span)  # the server span when tracing is on, else None
    client_request_id: str | None = None  # the client's id, only echoed and logged

    @classmethod
    def begin(cls, headers) -> "RequestContext":
        """A new server id; the client's own id (x-client-request-id, else x-request-id) if bounded."""
        given = headers.get(CLIENT_REQUEST_ID) or headers.get("x-request-id")
        return cls(new_request_id(), client_request_id=bounded_client_id(given))

    def headers(self, tier=None, backend: str = "none", upstream_s: float = 0.0) -> dict[str, str]:
        """The answer's headers: the tier that served it (or was chosen), its worker, and the time
        the gateway itself took (all of it, less the time spent waiting on workers)."""
        overhead_ms = max(0.0, (time.perf_counter() - self.start - upstream_s) * 1000.0)
        headers = {"x-request-id": self.request_id,
                   TIER: tier.name if tier is not None else "none",
                   MODEL: tier.model if tier is not None else "none",
                   BACKEND: backend,
                   OVERHEAD: f"{overhead_ms:.3f}"}
        if self.client_request_id:
            headers[CLIENT_REQUEST_ID] = self.client_request_id
        return headers


CTX = web.RequestKey("tiergate_ctx", RequestContext)


def credentials(request: web.Request) -> str | None:
    """The client's key as an Authorization value: a bearer token, or Anthropic's `x-api-key`."""
    key = request.headers.get("x-api-key")
    return request.headers.get("Authorization") or (f"Bearer {key}" if key else None)
