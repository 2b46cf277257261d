"""The gateway's OpenTelemetry spans (docs/tracing.md): turning tracing on for a gateway process,
one CLIENT span per upstream attempt carrying the `traceparent` the worker continues, and the
request's attributes on its server span. Every call here is a no-op while tracing is off."""
from __future__ import annotations

import logging

from webwire import tracing

from ..config.tracing import TracingConfig

log = logging.getLogger(__name__)
# Besides the workers' probes: the console's pages and their JSON polling.
EXCLUDED_PATHS = (*tracing.DEFAULT_EXCLUDED_PATHS, "^/console", r"^/openapi\.json$")


def start(settings: TracingConfig) -> bool:
    """Install tracing for this gateway process when the config turns it on (before build_app:
    the aiohttp instrumentation wraps web.Application). True when it is on."""
    exporting = settings.exporting()
    if exporting is None:
        return False
    tracing.install(exporting, EXCLUDED_PATHS)
    return True


def warn_if_changed(running: TracingConfig, new: TracingConfig) -> None:
    """Tracing is set up once per process: a reload cannot change it, so it says that it did not."""
    if running != new:
        log.warning("config reload: the tracing section changed; it takes effect when the gateway restarts")


class _Attempt:
    """The span of one upstream attempt, with the worker's answer or failure on it."""
    __slots__ = ("_manager", "_span")

    def __init__(self, tier, backend, number: int):
        self._manager = tracing.span("upstream", {
            "tiergate.tier": tier.name, "gen_ai.request.model": tier.model, "tiergate.worker": backend.address,
            "server.address": backend.url, "tiergate.attempt": number, "tiergate.failover": number > 1}, client=True)
        self._span = None

    def __enter__(self) -> "_Attempt":
        self._span = self._manager.__enter__()
        return self

    def __exit__(self, kind, exc, traceback) -> bool:
        status = getattr(exc, "status", None)  # upstream.py's _UpstreamStatus: the worker's 5xx/401/403
        if isinstance(status, int):
            self._span.set_attribute("http.response.status_code", status)
        return self._manager.__exit__(kind, exc, traceback)

    @staticmethod
    def headers(headers: dict[str, str]) -> dict[str, str]:
        """The attempt's request headers with its traceparent (call inside the `with`)."""
        return tracing.inject(headers)

    def answered(self, status: int) -> None:
        self._span.set_attribute("http.response.status_code", status)


class _NoAttempt:
    __slots__ = ()

    def __enter__(self) -> "_NoAttempt":
        return self

    def __exit__(self, *exc) -> bool:
        return False

    @staticmethod
    def headers(headers: dict[str, str]) -> dict[str, str]:
        return headers

    def answered(self, status: int) -> None:
        pass


_NO_ATTEMPT = _NoAttempt()


def upstream_attempt(tier, backend, number: int):
    """`with upstream_attempt(...) as attempt:` around one attempt; number counts from 1."""
    return _Attempt(tier, backend, number) if tracing.enabled() else _NO_ATTEMPT


def annotate(request, outcome) -> None:
    """What the request came to, on its server span: who, where, and the tokens it cost."""
    span, route = request.ctx.span, request.route
    if span is None:
        return
    usage = outcome.usage
    span.set_attributes({
        "tiergate.request_id": request.id, "tiergate.tenant": request.tenant.name, "tiergate.tier": outcome.served.name,
        "gen_ai.request.model": route.requested_model, "gen_ai.response.model": outcome.served.model,
        "tiergate.routed_by": route.decision.routed_by.value, "tiergate.priority": route.decision.priority,
        "tiergate.worker": outcome.backend, "tiergate.attempts": outcome.attempts, "tiergate.stream": outcome.stream,
        "gen_ai.usage.input_tokens": usage.prompt_tokens, "gen_ai.usage.output_tokens": usage.completion_tokens,
        "tiergate.usage.reported": usage.reported, "tiergate.usage.source": usage.source})
