"""relay(): one request's answer from the workers, in process against a scripted transport:
the usage it carries or the count that replaces it, the attempts, a re-ask's bill, a worker's 4xx
passed on as its verdict."""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from gateway.api.handlers import build_request
from gateway.core.relay import MAX_REPORTED_TOKENS, Delivery, relay, reported_in
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for
from tests.support.in_process import chat_call, services_for
from tests.support.scripted_transport import Reply, ScriptedTransport, chat_answer

SMALL, LARGE = "http://small.test", "http://large.test"
SCHEMA = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}


def _services(redis_prefix, script):
    tiers = [{**tier("small", 1, [SMALL]), "capabilities": {"structured_outputs": True}},
             {**tier("large", 2, [LARGE]), "capabilities": {"structured_outputs": True}}]
    transport = ScriptedTransport(script)
    return services_for(base_config(tiers, redis_prefix), transport), transport


async def _relay(services, **body):
    request = build_request(services, chat_call(services, **body))
    return request, await relay(request, services.upstreams, Delivery())


async def test_a_whole_answer_carries_the_workers_usage_and_its_body(redis_prefix):
    services, transport = _services(redis_prefix, lambda sent: Reply(body=chat_answer("hello", 7, 3)))
    request, outcome = await _relay(services, model="small")
    usage = outcome.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.reported, usage.source) == (7, 3, True, "worker")
    assert outcome.served.name == "small" and outcome.attempts == 1 and outcome.error is None
    assert json.loads(outcome.answer.body)["choices"][0]["message"]["content"] == "hello"
    [sent] = transport.sent
    assert sent.url == SMALL + "/v1/chat/completions" and sent.json["model"] == "model-small"
    assert sent.headers["x-request-id"] == request.id


async def test_an_answer_without_usage_is_estimated_from_its_text(redis_prefix):
    services, _ = _services(redis_prefix, lambda sent: Reply(body=chat_answer("x" * 41, usage=False)))
    request, outcome = await _relay(services, model="small")
    usage = outcome.usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (request.route.prompt_bound, 11)
    assert usage.source == "estimate" and not usage.reported


@pytest.mark.parametrize("count", [-5, -1.0, 2.5, MAX_REPORTED_TOKENS + 1, float("inf"), float("nan"), True,
                                   "7", [7], {"n": 7}])
def test_a_reported_count_that_is_not_a_whole_number_in_range_is_not_believed(count):
    assert reported_in({"usage": {"prompt_tokens": 3, "completion_tokens": count}}) is None
    assert reported_in({"usage": {"prompt_tokens": count, "completion_tokens": 3}}) is None


def test_reported_counts_are_taken_at_their_bounds_and_absent_ones_are_zero():
    usage = reported_in({"usage": {"prompt_tokens": MAX_REPORTED_TOKENS, "completion_tokens": 4.0}})
    assert (usage.prompt_tokens, usage.completion_tokens, usage.reported) == (MAX_REPORTED_TOKENS, 4, True)
    assert (reported_in({"usage": {"completion_tokens": 0}}).prompt_tokens, reported_in({"usage": None})) == (0, None)


async def test_a_negative_reported_usage_is_counted_instead_of_paying_the_tenant(redis_prefix):
    answer = chat_answer("x" * 41, prompt_tokens=-1000, completion_tokens=-1000)
    services, _ = _services(redis_prefix, lambda sent: Reply(body=answer))
    request, outcome = await _relay(services, model="small")
    usage = outcome.usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (request.route.prompt_bound, 11)
    assert not usage.reported and usage.source == "estimate"


async def test_a_request_cancelled_while_the_worker_generates_is_billed_the_workers_count(redis_prefix):
    generating = asyncio.Event()  # never set: the worker is still at it when the client leaves
    counted = {"finished": True, "usage": {"prompt_tokens": 9, "completion_tokens": 4}}

    def script(sent):
        return Reply(body=counted) if "/abort" in sent.url else Reply(body=chat_answer(), hold=generating)

    services, transport = _services(redis_prefix, script)
    request = build_request(services, chat_call(services, model="small"))
    task = asyncio.create_task(relay(request, services.upstreams, Delivery()))
    await wait_for(lambda: transport.sent, timeout_s=5, what="the request sent to the worker")
    task.cancel()
    outcome = await task
    assert isinstance(outcome.error, asyncio.CancelledError) and outcome.opened is None
    assert transport.sent[-1].url == f"{SMALL}/v1/internal/requests/{request.id}/abort?wait_s=2"
    usage = outcome.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.source) == (9, 4, "worker")


async def test_a_misshapen_structured_answer_is_asked_again_above_and_the_first_is_billed(redis_prefix):
    def script(sent):
        content = "not json" if sent.url.startswith(SMALL) else json.dumps({"name": "Ada"})
        return Reply(body=chat_answer(content, 5, 2 if sent.url.startswith(SMALL) else 3))

    services, transport = _services(redis_prefix, script)
    request, outcome = await _relay(services, model="small", response_format=FORMAT)
    assert outcome.served.name == "large" and outcome.attempts == 2
    [dropped] = outcome.other_attempts
    assert dropped.tier.name == "small" and dropped.usage.completion_tokens == 2
    assert (dropped.attempt_id, outcome.attempt_id) == (request.id, f"{request.id}.2")  # a bill each
    assert outcome.usage.completion_tokens == 3
    assert transport.responses[0].released  # the dropped answer's connection went back


async def test_a_workers_4xx_is_passed_on_and_never_counts(redis_prefix):
    rejected = {"error": {"message": "model rejected upstream", "type": "invalid_request_error", "param": "model",
                          "code": "model_not_found"}}
    transport = ScriptedTransport(lambda sent: Reply(404, rejected))
    doc = base_config([tier("t", 1, [SMALL, LARGE], model="reject-me")], redis_prefix,
                      breaker={"failure_threshold": 1, "open_s": 30})
    services = services_for(doc, transport)
    for _ in range(6):
        _, outcome = await _relay(services, model="t")
        assert outcome.attempts == 1 and outcome.error is None  # a verdict is not retried
        assert outcome.answer.status == 404 and json.loads(outcome.answer.body)["error"] == rejected["error"]
        outcome.opened.backend.on_done()
    assert len(transport.sent) == 6
    now = time.monotonic()
    assert all(b.breaker_state(now) == "closed" and b.failures == 0 for b in services.upstreams.pools.backends.values())
