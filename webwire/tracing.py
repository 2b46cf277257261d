"""OpenTelemetry for both HTTP servers (gateway and worker): one switch, one exporter, and span
helpers that cost one global check while tracing is off.

`install(exporting)` sets up the SDK: a TracerProvider sampling parent-based (a client's sampled
`traceparent` is always followed, new traces at `sample_ratio`), a BatchSpanProcessor with a
bounded queue in front of the OTLP/HTTP exporter, and the aiohttp server instrumentation, which
gives every request a SERVER span continuing the caller's `traceparent`. The instrumentation
wraps `web.Application`, so install before building the app. Without `install` nothing of the
SDK is imported and every helper below returns a shared no-op.
"""
from __future__ import annotations

import functools
import inspect
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

# The servers' probes and scrapes: a span for each would bury the requests in noise.
EXCLUDED_PATHS_ENV = "OTEL_PYTHON_AIOHTTP_SERVER_EXCLUDED_URLS"
ANY_EXCLUDED_PATHS_ENV = "OTEL_PYTHON_EXCLUDED_URLS"  # the instrumentations' shared variable
DEFAULT_EXCLUDED_PATHS = ("^/health$", "^/metrics$")
TRACER_NAME = "tiergate"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Exporting:
    """Where and how spans leave a process (the gateway's `tracing:` section, a worker's flags)."""
    endpoint: str  # OTLP/HTTP base URL; spans go to <endpoint>/v1/traces
    service_name: str
    sample_ratio: float = 1.0
    export_timeout_s: float = 10.0
    export_interval_s: float = 5.0
    max_queued_spans: int = 2048  # past it the processor drops new spans rather than grow


_tracer = None  # the SDK tracer while tracing is on; None: every helper is a no-op
_provider = None
_inject = None  # opentelemetry.propagate.inject, bound at install
_current = None  # opentelemetry.trace.get_current_span, bound at install
_kinds: dict[bool, Any] = {}  # client? -> SpanKind, bound at install


class _NoSpan:
    """Stands in for a span (and its context manager) while tracing is off."""
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def set_attribute(self, key: str, value) -> None:
        pass

    def set_attributes(self, attributes: dict) -> None:
        pass

    def is_recording(self) -> bool:
        return False


NO_SPAN = _NoSpan()


def enabled() -> bool:
    return _tracer is not None


def install(exporting: Exporting, excluded_paths: tuple[str, ...] = DEFAULT_EXCLUDED_PATHS):
    """Turn tracing on for this process; returns the TracerProvider, which exports what is still
    queued when the process exits (or when shut down)."""
    global _tracer, _provider, _inject, _current
    if _provider is not None:
        raise RuntimeError("tracing is already installed in this process")
    from opentelemetry import propagate, trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.aiohttp_server import AioHttpServerInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    provider = TracerProvider(resource=Resource.create({"service.name": exporting.service_name}),
                              sampler=ParentBased(TraceIdRatioBased(exporting.sample_ratio)))
    exporter = OTLPSpanExporter(endpoint=exporting.endpoint.rstrip("/") + "/v1/traces",
                                timeout=exporting.export_timeout_s)
    provider.add_span_processor(BatchSpanProcessor(
        exporter, max_queue_size=exporting.max_queued_spans,
        max_export_batch_size=min(512, exporting.max_queued_spans),
        schedule_delay_millis=exporting.export_interval_s * 1000.0))
    trace.set_tracer_provider(provider)
    if not (os.environ.get(EXCLUDED_PATHS_ENV) or os.environ.get(ANY_EXCLUDED_PATHS_ENV)):
        os.environ[EXCLUDED_PATHS_ENV] = ",".join(excluded_paths)  # an operator's own list wins
    AioHttpServerInstrumentor().instrument(tracer_provider=provider)
    _kinds.update({False: trace.SpanKind.INTERNAL, True: trace.SpanKind.CLIENT})
    _inject, _current = propagate.inject, trace.get_current_span
    _provider, _tracer = provider, provider.get_tracer(TRACER_NAME)
    log.info("tracing on: spans of %s to %s/v1/traces", exporting.service_name, exporting.endpoint)
    return provider


def _unsampled() -> bool:
    """Inside a trace that is not recorded: its children would not be either (parent-based
    sampling), so they are skipped rather than made as non-recording spans."""
    current = _current()
    return not current.is_recording() and current.get_span_context().is_valid


def span(name: str, attributes: dict[str, Any] | None = None, client: bool = False):
    """A child of the current span, made current inside `with`; NO_SPAN while tracing is off
    and inside an unsampled trace."""
    if _tracer is None or _unsampled():
        return NO_SPAN
    return _tracer.start_as_current_span(name, attributes=attributes, kind=_kinds[client])


def traced(name: str):
    """Decorator: each call of the function (plain or async) runs inside span(name)."""
    def wrap(fn):
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args, **kwargs):
                if _tracer is None:
                    return await fn(*args, **kwargs)
                with span(name):
                    return await fn(*args, **kwargs)
            return run_async

        @functools.wraps(fn)
        def run(*args, **kwargs):
            if _tracer is None:
                return fn(*args, **kwargs)
            with span(name):
                return fn(*args, **kwargs)
        return run
    return wrap


def current_span():
    """The span of the code running now (a request's server span in a handler); None while off."""
    return None if _current is None else _current()


def inject(headers: dict[str, str]) -> dict[str, str]:
    """`headers` with the current span's `traceparent` (and `tracestate`) added while tracing is on."""
    if _inject is not None:
        _inject(headers)
    return headers


def record_past(name: str, start_s: float, end_s: float, attributes: dict[str, Any] | None = None) -> None:
    """A finished child of the current span from two time.monotonic() readings: timed by whoever
    measured them (the engine's thread), created here afterwards, so tracing stays out of that code."""
    if _tracer is None or _unsampled():
        return
    offset_ns = time.time_ns() - time.monotonic_ns()
    child = _tracer.start_span(name, start_time=int(start_s * 1e9) + offset_ns, attributes=attributes)
    child.end(end_time=int(max(end_s, start_s) * 1e9) + offset_ns)
