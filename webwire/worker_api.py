"""The worker's HTTP API, declared once: each route's method and path, the name of the handler
every server of it implements, the kind of worker that serves it (`task`: generate or embed) and
the `object` its 200 answer carries. Our worker (backends/openai_server.py), the embedding worker
(backends/embed_server.py) and the fake upstream (launcher/fake_upstream.py) build their routes
from it; tests/backends/test_worker_api_shapes.py holds the fake to the real worker's answers."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from aiohttp import web

GENERATE, EMBED = "generate", "embed"
ABORT_PATH = "/v1/internal/requests/{request_id}/abort"


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: str  # the server's method that answers it
    tasks: frozenset[str]
    answers: str | None  # the `object` of a 200 JSON answer; None: not JSON (Prometheus text)


ROUTES = (
    Route("POST", "/v1/chat/completions", "chat", frozenset({GENERATE}), "chat.completion"),
    Route("POST", "/v1/completions", "completions", frozenset({GENERATE}), "text_completion"),
    Route("POST", "/v1/embeddings", "embeddings", frozenset({EMBED}), "list"),
    Route("GET", "/v1/models", "models", frozenset({GENERATE, EMBED}), "list"),
    Route("GET", "/health", "health", frozenset({GENERATE, EMBED}), None),
    Route("GET", "/metrics", "metrics_page", frozenset({GENERATE, EMBED}), None),
    # what a request the gateway gave up on generated (it is stopped if it still runs): its bill
    Route("POST", ABORT_PATH, "abort", frozenset({GENERATE}), "request.usage"),
)


def add_routes(app: web.Application, server, tasks: set[str]) -> None:
    """Every route a worker of these tasks serves, answered by `server`'s handler of that name."""
    for route in ROUTES:
        if route.tasks & tasks:
            app.router.add_route(route.method, route.path, getattr(server, route.handler))


def abort_url(base: str, request_id: str, wait_s: float) -> str:
    return base + ABORT_PATH.format(request_id=quote(request_id, safe="")) + f"?wait_s={wait_s:g}"
