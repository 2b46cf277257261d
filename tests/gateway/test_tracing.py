"""Traces from the client through the gateway to the worker, as an OTLP/HTTP receiver in this test
gets them: a real SmolLM2 worker and a real gateway process, both exporting to the receiver, and
one chat request from the real `openai` SDK carrying the client's own `traceparent`. And with
tracing off: no SDK, no trace headers upstream, nothing exported."""
import asyncio
import secrets
import threading

import openai
import pytest
from aiohttp import web
from opentelemetry import trace

from gateway.config import parse_config
from gateway.config.tracing import TracingConfig
from gateway.core.trace_spans import start as start_tracing
from launcher.otlp_sink import start_sink
from tests.gateway.e2e_stack import e2e_stack, tier
from tests.support import Pending, wait_for
from tests.support.stack import label
from webwire import tracing
from webwire.trace_flags import as_flags

GATEWAY_STEPS = {"parse", "classify", "decide", "admit", "relay", "upstream", "finish"}
WORKER_PHASES = ("queue", "prefill", "decode")
SERVER, CLIENT = 2, 3  # opentelemetry.proto.trace.v1.Span.SpanKind
SLACK_NS = 2_000_000  # spans of one process timed from two clocks (monotonic and wall) may differ this much


@pytest.fixture
async def sink():
    sink, runner, url = await start_sink()
    yield sink, url
    await runner.cleanup()


def _complete(received, trace_id: str, steps=GATEWAY_STEPS):
    """The trace once every span it must have has arrived (the server spans end last)."""
    names = {(s.service, s.name) for s in received.trace(trace_id)}
    wanted = {("tiergate-gateway", n) for n in steps | {"POST /v1/chat/completions"}} | \
             {("tiergate-worker", n) for n in (*WORKER_PHASES, "POST /v1/chat/completions")}
    return received.trace(trace_id) if wanted <= names else Pending(sorted(wanted - names))


def _one(spans, service: str, name: str):
    found = [s for s in spans if s.service == service and s.name == name]
    assert len(found) == 1, (service, name, found)
    return found[0]


def _attempts(spans, gateway_steps: dict) -> list:
    """The upstream attempts in order, each a CLIENT span under relay, numbered and flagged as failover."""
    attempts = sorted((s for s in spans if s.name == "upstream"), key=lambda s: s.start_ns)
    for number, attempt in enumerate(attempts, start=1):
        assert attempt.parent_span_id == gateway_steps["relay"].span_id and attempt.kind == CLIENT
        assert attempt.attributes["tiergate.attempt"] == number
        assert attempt.attributes["tiergate.failover"] is (number > 1)
    return attempts


async def _ask(client, model: str, flags: str):
    trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
    raw = await client.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": "Name one colour."}], max_tokens=8, temperature=0,
        extra_headers={"traceparent": f"00-{trace_id}-{client_span}-{flags}"})
    return raw, trace_id, client_span


@pytest.mark.live  # a worker and a gateway process
async def test_one_request_is_one_connected_trace_under_the_clients_span(tmp_path, sink, fakes):
    receiver, url = sink
    (failing, failing_url), = await fakes(1)
    failing.fail_status = 503  # a worker fault: the gateway fails over to the next tier up
    section = {"enabled": True, "otlp_endpoint": url, "export_interval_s": 0.2}  # exported within 0.2 s
    worker_flags = tuple(as_flags(TracingConfig(**section).for_workers()))  # what the launcher passes
    stack = await asyncio.to_thread(
        e2e_stack, tmp_path, lambda urls: [tier("small", 1, [failing_url]), tier("big", 2, urls)], 1, worker_flags,
        tracing=section)
    try:
        client = openai.AsyncOpenAI(base_url=stack.url + "/v1", api_key="unused", max_retries=0)
        # first a trace the client does not record (flags 00): the gateway and the worker follow it
        _, unsampled_id, _ = await _ask(client, "big", "00")
        raw, trace_id, client_span = await _ask(client, "auto", "01")
        failed_over, failover_id, _ = await _ask(client, "small", "01")  # the failing worker, then tier big
        spans = await wait_for(lambda: _complete(receiver, trace_id), timeout_s=60, what="the whole trace")
        failover_spans = await wait_for(lambda: _complete(receiver, failover_id, GATEWAY_STEPS - {"classify"}),
                                        timeout_s=60, what="the failed-over request's trace")
    finally:
        await asyncio.to_thread(stack.close)
    # each process exports its spans in the order they ended: the unsampled request's would be here by now
    assert receiver.trace(unsampled_id) == []

    # one tree: every span hangs from the client's span or from another span of this trace
    ids = {s.span_id for s in spans}
    assert len(ids) == len(spans)
    assert all(s.parent_span_id in ids | {client_span} for s in spans), spans
    roots = [s for s in spans if s.parent_span_id == client_span]
    gateway = _one(spans, "tiergate-gateway", "POST /v1/chat/completions")
    assert roots == [gateway] and gateway.kind == SERVER

    # the gateway's steps are its server span's children (upstream attempts under relay)
    steps = {s.name: s for s in spans if s.service == "tiergate-gateway" and s is not gateway}
    assert set(steps) == GATEWAY_STEPS
    assert {s.name for s in steps.values() if s.parent_span_id == gateway.span_id} == GATEWAY_STEPS - {"upstream"}
    attempt = _attempts(spans, steps)[-1]  # "auto" may have chosen the failing tier first
    assert attempt.attributes["tiergate.worker"] == label(stack.worker_urls[0])
    assert attempt.attributes["http.response.status_code"] == 200

    # the worker continued the attempt's traceparent; its phases are its server span's children
    worker = _one(spans, "tiergate-worker", "POST /v1/chat/completions")
    assert worker.parent_span_id == attempt.span_id and worker.kind == SERVER
    queue, prefill, decode = (_one(spans, "tiergate-worker", name) for name in WORKER_PHASES)
    assert {queue.parent_span_id, prefill.parent_span_id, decode.parent_span_id} == {worker.span_id}
    assert worker.start_ns - SLACK_NS <= queue.start_ns <= queue.end_ns <= prefill.start_ns + SLACK_NS
    assert prefill.start_ns <= prefill.end_ns <= decode.start_ns + SLACK_NS
    assert decode.start_ns <= decode.end_ns <= worker.end_ns + SLACK_NS

    # token counts and who asked, as the answer reported them
    usage = raw.parse().usage
    assert prefill.attributes["gen_ai.usage.input_tokens"] == usage.prompt_tokens
    assert decode.attributes["gen_ai.usage.output_tokens"] == usage.completion_tokens
    assert worker.attributes["gen_ai.usage.output_tokens"] == usage.completion_tokens
    assert gateway.attributes["gen_ai.usage.input_tokens"] == usage.prompt_tokens
    assert gateway.attributes["gen_ai.usage.output_tokens"] == usage.completion_tokens
    assert gateway.attributes["tiergate.request_id"] == raw.headers["x-request-id"]
    # the attempt's id: the request's, or `<id>.<n>` for the n-th attempt (this one failed over)
    assert worker.attributes["tiergate.request_id"].partition(".")[0] == raw.headers["x-request-id"]
    assert gateway.attributes["tiergate.tier"] == "big" and gateway.attributes["gen_ai.request.model"] == "auto"
    assert gateway.attributes["tiergate.tenant"] == "anonymous"  # no tenants configured

    # a failover: one attempt span per worker tried, the worker continuing the one that answered
    steps = {s.name: s for s in failover_spans if s.service == "tiergate-gateway"}
    first, second = _attempts(failover_spans, steps)
    assert (first.attributes["tiergate.worker"], first.attributes["tiergate.tier"]) == \
        (failing_url.removeprefix("http://"), "small")
    assert first.attributes["http.response.status_code"] == 503
    assert (second.attributes["tiergate.worker"], second.attributes["tiergate.tier"]) == (label(stack.worker_urls[0]), "big")
    assert second.attributes["http.response.status_code"] == 200
    assert _one(failover_spans, "tiergate-worker", "POST /v1/chat/completions").parent_span_id == second.span_id
    assert steps["POST /v1/chat/completions"].attributes["tiergate.attempts"] == 2
    assert failed_over.headers["x-tiergate-tier"] == "big"


async def test_tracing_off_loads_no_sdk_sends_no_traceparent_and_exports_nothing(gateway, fakes, http, sink,
                                                                                 redis_prefix):
    receiver, url = sink
    (fake, upstream), = await fakes(1)
    doc = {"tiers": [{"name": "small", "level": 1, "model": "m", "price_per_mtok": {"input": 0.1, "output": 0.2},
                      "workers": [{"url": upstream}]}],
           "redis": {"url": "redis://127.0.0.1:6379/0", "key_prefix": redis_prefix},
           "tracing": {"otlp_endpoint": url, "export_interval_s": 0.1}}  # an endpoint, but not enabled
    assert start_tracing(parse_config(doc).tracing) is False
    gw = await gateway(doc)
    async with http.post(gw.url + "/v1/chat/completions", json={"model": "small", "messages": [
            {"role": "user", "content": "hi"}]}, headers={"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01"}) as r:
        assert r.status == 200
    assert fake.served == 1 and "traceparent" not in fake.seen[-1]["headers"]
    assert not tracing.enabled() and tracing.span("parse") is tracing.NO_SPAN and tracing.current_span() is None
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"  # no SDK provider installed
    assert web.Application.__module__ == "aiohttp.web_app"  # the instrumentation never wrapped it
    assert not [t.name for t in threading.enumerate() if t.name.startswith("OtelBatch")]
    assert receiver.exports == 0
