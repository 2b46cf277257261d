"""serve(): the one request path, in process against a scripted transport. A stream needs a client
connection, a refused request still counts against the tenant's rate, a batch priority in the
Call overrides the tenant's, the gate is held from admission to the end, and admission reserves
what the worker is asked for."""
from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import replace

import pytest

from gateway.api.handlers import serve
from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.gateway.recording_policy import RecordingPolicy
from tests.support.in_process import chat_call, services_for
from tests.support.scripted_transport import Reply, ScriptedTransport, chat_answer
from wire.errors import OpenAIError

KEY = "sk-handlers-key"
SMALL = "http://small.test"


def _answering() -> ScriptedTransport:
    return ScriptedTransport(lambda sent: Reply(body=chat_answer()))


def _with_tenant(redis_prefix: str, transport: ScriptedTransport, **policy):
    tenants = {"acme": {"keys": [{"id": "k", "sha256": hash_key(KEY)}], **policy}}
    return services_for(base_config([tier("small", 1, [SMALL])], redis_prefix, tenants=tenants), transport)


async def _refusal(services, call) -> OpenAIError:
    with pytest.raises(OpenAIError) as refused:
        await serve(services, call)
    return refused.value


async def test_a_stream_without_a_client_connection_is_a_400_naming_stream(redis_prefix):
    transport = _answering()
    services = _with_tenant(redis_prefix, transport)
    err = await _refusal(services, chat_call(services, KEY, model="small", stream=True))
    assert (err.status, err.param) == (400, "stream") and "client connection" in err.message
    assert transport.sent == []


async def test_a_refused_request_still_counts_against_the_tenants_rate(redis_prefix):
    transport = _answering()
    services = _with_tenant(redis_prefix, transport, rate_limits={"requests_per_minute": 2})
    for _ in range(2):
        err = await _refusal(services, chat_call(services, KEY, model="small", stream=True))
        assert err.status == 400
    err = await _refusal(services, chat_call(services, KEY, model="small", stream=True))
    assert err.status == 429 and err.code == "rate_limit_exceeded"  # past the limit its 429 replaces the 400
    err = await _refusal(services, chat_call(services, KEY, model="small"))
    assert err.status == 429 and transport.sent == []  # well-formed requests are limited the same


async def test_a_batch_priority_in_the_call_overrides_the_tenants(redis_prefix):
    transport = _answering()
    services = _with_tenant(redis_prefix, transport)
    call = chat_call(services, KEY, model="small")
    for sent in (call, replace(call, priority="batch")):
        assert (await serve(services, sent)).status == 200
    assert [s.headers["x-tiergate-priority"] for s in transport.sent] == ["interactive", "batch"]


async def test_the_gate_is_held_from_admission_to_the_end(redis_prefix):
    policy, held = RecordingPolicy(), []
    transport = ScriptedTransport(lambda sent: held.append(("worker asked", bool(gates))) or Reply(body=chat_answer()))
    gates: list[str] = []

    @asynccontextmanager
    async def gate(tier):
        gates.append(tier.name)
        held.append(("entered", policy.admitted, len(policy.settled)))
        yield
        held.append(("left", policy.admitted, len(policy.settled), transport.responses[0].released))
        gates.pop()

    services = services_for(base_config([tier("small", 1, [SMALL])], redis_prefix), transport, policy=policy)
    answer = await serve(services, chat_call(services, "key-a", model="small"), gate=gate)
    assert answer.status == 200 and gates == []
    # admitted inside the gate, and settled (the upstream given back) before it was let go
    assert held == [("entered", 0, 0), ("worker asked", True), ("left", 1, 1, True)]
    with pytest.raises(OpenAIError):  # refused before admission: the gate is never taken
        await serve(services, chat_call(services, "key-a", model="small", stream=True), gate=gate)
    assert len(held) == 3


async def test_what_admission_reserves_is_what_the_worker_is_asked_for(redis_prefix):
    """One max_tokens rule: the client's value (max_completion_tokens first) or the default,
    capped by the policy and by the tier, both for the reservation and in the worker's body."""
    transport = _answering()
    small = {**tier("small", 1, [SMALL]), "max_tokens_cap": 30}
    policy = RecordingPolicy(cap=40)
    services = services_for(base_config([small], redis_prefix, limits={"default_max_tokens": 64}), transport,
                            policy=policy)
    for extra in ({}, {"max_completion_tokens": 10, "max_tokens": 20}, {"max_tokens": 35}):
        await serve(services, chat_call(services, "key-a", model="small", **extra))
    bodies = [sent.json for sent in transport.sent]
    assert policy.reserved == [30, 10, 30]
    assert [b.get("max_completion_tokens", b.get("max_tokens")) for b in bodies] == [30, 10, 30]
    assert bodies[1]["max_tokens"] == 10  # never more than the rule allows, whichever field the worker reads
