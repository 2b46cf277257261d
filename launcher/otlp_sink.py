"""A minimal OTLP/HTTP trace receiver, for the tracing tests and the gateway benchmark's tracing-on
run: it accepts `POST /v1/traces` (protobuf `ExportTraceServiceRequest`, as the OpenTelemetry SDK's
OTLP/HTTP exporter sends it), keeps the latest spans, and answers like a collector.
Run alone: `python -m launcher.otlp_sink --port 4318`; GET /stats counts what it received.
"""
from __future__ import annotations

import argparse
import gzip
from collections import deque
from dataclasses import dataclass

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                       ExportTraceServiceResponse)

MAX_BODY_BYTES = 16 << 20  # the SDK's batches are far smaller (512 spans)


@dataclass(frozen=True)
class ReceivedSpan:
    service: str  # the resource's service.name
    name: str
    trace_id: str  # hex, as in a traceparent
    span_id: str
    parent_span_id: str  # "" for a root span
    kind: int  # opentelemetry.proto.trace.v1.Span.SpanKind
    start_ns: int
    end_ns: int
    attributes: dict


def _value(any_value):
    which = any_value.WhichOneof("value")
    return getattr(any_value, which) if which else None


def _attributes(key_values) -> dict:
    return {kv.key: _value(kv.value) for kv in key_values}


def decode(body: bytes) -> list[ReceivedSpan]:
    message = ExportTraceServiceRequest()
    message.ParseFromString(body)
    spans = []
    for resource_spans in message.resource_spans:
        service = _attributes(resource_spans.resource.attributes).get("service.name", "")
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                spans.append(ReceivedSpan(service, s.name, s.trace_id.hex(), s.span_id.hex(),
                                          s.parent_span_id.hex(), s.kind, s.start_time_unix_nano,
                                          s.end_time_unix_nano, _attributes(s.attributes)))
    return spans


class OtlpSink:
    def __init__(self, keep: int = 10_000):
        self.spans: deque[ReceivedSpan] = deque(maxlen=keep)  # the latest; `received` counts them all
        self.received = 0
        self.exports = 0  # POSTs accepted

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/v1/traces", self._traces)
        app.router.add_get("/stats", self._stats)
        return app

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response({"received": self.received, "exports": self.exports})

    async def _traces(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        try:
            spans = decode(body)
        except Exception as exc:  # protobuf's DecodeError, or a body that is no message at all
            return web.Response(status=400, text=f"not an ExportTraceServiceRequest: {exc}")
        self.spans.extend(spans)
        self.received += len(spans)
        self.exports += 1
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.trace_id == trace_id]


async def start_sink(host: str = "127.0.0.1", port: int = 0) -> tuple[OtlpSink, web.AppRunner, str]:
    """Start an OtlpSink in this event loop; returns it, its runner (to clean up) and its base URL."""
    sink = OtlpSink()
    runner = web.AppRunner(sink.app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return sink, runner, f"http://{host}:{runner.addresses[0][1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4318)
    args = parser.parse_args()
    sink = OtlpSink(keep=1000)
    try:
        web.run_app(sink.app(), host=args.host, port=args.port, print=None, access_log=None)
    finally:
        print(f"received {sink.received} spans in {sink.exports} exports", flush=True)


if __name__ == "__main__":
    main()
