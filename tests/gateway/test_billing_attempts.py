"""Every attempt has its own id and its own bill (issue 55, findings 2 and 3), through `serve` in
process: the real policy and ledger in Redis, scripted workers that count what they generate
(their abort endpoint answers with the attempt's count). Each test says what it guards; each
fails on 45d8644, where retries and abandoned attempts were billed nothing."""
from __future__ import annotations

import asyncio
import glob
import json

import aiohttp
import pytest
import redis.asyncio as aioredis

from gateway.api.handlers import serve
from gateway.batches.jsonl import BatchLine
from gateway.batches.lines import TryLater, run_line
from gateway.core.metrics import METRICS
from gateway.core.relay import Delivery
from gateway.core.upstream import ANSWER_TIMEOUT
from policies.keys import hash_key
from policies.keyspace import KeySpace
from policies.usage_log import read_records
from tests.gateway.gw_helpers import base_config, tier
from tests.support import SHARED_REDIS, wait_for
from tests.support.in_process import chat_call, services_for
from tests.support.scripted_transport import Reply, ScriptedTransport, Sent, chat_answer
from wire.errors import OpenAIError
from wire.prompt_bound import prompt_token_bound
from wire.requests import parse_chat

KEY = "sk-attempts-key"
A, B, C = "http://a.test", "http://b.test", "http://c.test"


def _error(status: int, message: str) -> Reply:
    return Reply(status, {"error": {"message": message, "type": "server_error", "param": None, "code": None}})


class CountingWorkers:
    """Scripted workers: `plan[url]` is a list of what each generation sent there does, in turn
    (workers given one list share it):
    ("ok", prompt, completion), ("held", event, prompt, completion) (answers once `event` is
    set), ("fail", status, prompt, completion) (a worker error after it generated), or
    ("timeout", prompt, completion) (still generating when the gateway stops waiting). The abort endpoint answers with the count of the attempt it names."""

    def __init__(self, plan: dict[str, list[tuple]]):
        self.plan = plan
        self.counts: dict[str, tuple[int, int]] = {}  # attempt id -> what its worker generated
        self.transport = ScriptedTransport(self.answer)

    @property
    def generations(self) -> list[Sent]:
        return [s for s in self.transport.sent if "/v1/internal/" not in s.url]

    def answer(self, sent: Sent) -> Reply:
        if "/v1/internal/requests/" in sent.url:
            attempt = sent.url.split("/v1/internal/requests/")[1].split("/abort")[0]
            if attempt not in self.counts:
                return _error(404, "no such request here")
            prompt, completion = self.counts[attempt]
            return Reply(body={"finished": True, "usage": {"prompt_tokens": prompt, "completion_tokens": completion}})
        url = sent.url.split("/v1/")[0]
        what, *args = self.plan[url].pop(0)
        if what == "ok":
            return Reply(body=chat_answer("fine", *args))
        if what == "held":
            return Reply(body=chat_answer("fine", *args[1:]), hold=args[0])
        self.counts[sent.headers["x-request-id"]] = tuple(args[-2:])
        if what == "fail":
            return _error(args[0], "the worker broke mid-answer")
        raise aiohttp.SocketTimeoutError("Timeout on reading data from socket")


@pytest.fixture
def build(redis_prefix, tmp_path):
    def make(tiers: list[dict], plan: dict[str, list[tuple]], budgets: dict | None = None, **sections):
        workers = CountingWorkers(plan)
        acme = {"keys": [{"id": "k", "sha256": hash_key(KEY)}], **({"budgets": budgets} if budgets else {})}
        doc = base_config(tiers, redis_prefix, tenants={"acme": acme},
                          policy={"usage_log": {"dir": str(tmp_path / "usage"), "fsync": "always"}}, **sections)
        return services_for(doc, workers.transport), workers
    return make, lambda: read_records(sorted(glob.glob(str(tmp_path / "usage" / "*"))))


def _billed(records) -> dict[str, tuple[str, int, int]]:
    return {r.request_id: (r.tier, r.prompt_tokens, r.completion_tokens) for r in records}


@pytest.mark.parametrize("where", ["another worker", "the next tier up"])
async def test_an_attempt_that_broke_after_generating_is_billed_beside_the_answer(build, where):
    """Finding 2 (failover, escalation): the first attempt generated 40 tokens before its worker
    failed; the request is billed both attempts, each under its own id (45d8644: only the answer)."""
    make, records = build
    tiers = [tier("small", 1, [A, B])] if where == "another worker" else [tier("small", 1, [A]),
                                                                           tier("large", 2, [B])]
    steps = [("fail", 502, 12, 40), ("ok", 12, 7)]  # in turn, whichever worker is picked first
    services, workers = make(tiers, {A: steps, B: steps}, failover={"escalate": True, "max_attempts": 3})
    call = chat_call(services, KEY, model="small")
    answer = await serve(services, call)
    assert answer.status == 200
    first, second = workers.generations
    rid = call.ctx.request_id
    assert (first.headers["x-request-id"], second.headers["x-request-id"]) == (rid, f"{rid}.2")
    served_on = "small" if where == "another worker" else "large"
    billed = await wait_for(lambda: len(r := records()) == 2 and r, timeout_s=5, what="both attempts' records")
    assert _billed(billed) == {rid: ("small", 12, 40), f"{rid}.2": (served_on, 12, 7)}


async def test_a_timeout_while_the_worker_generates_is_the_answers_length_not_a_fault(build):
    """Findings 3 and 2 (timeouts): a whole answer longer than read_s is stopped at the worker and
    billed its 1,500 tokens; it is not retried or escalated and no breaker counts it (45d8644:
    three generations, a 503, $0 and a worker fault)."""
    make, records = build
    long = [("timeout", 30, 1500)]
    services, workers = make([tier("small", 1, [A, B]), tier("large", 2, [C])], {A: long, B: long, C: [("ok", 30, 9)]},
                             failover={"escalate": True, "max_attempts": 3})
    call = chat_call(services, KEY, model="small", max_tokens=2000)
    climbs = METRICS.escalations.labels("small", "large")._value.get()
    with pytest.raises(OpenAIError) as refused:
        await serve(services, call)
    assert (refused.value.status, refused.value.code) == (504, ANSWER_TIMEOUT)
    assert len(workers.generations) == 1  # no second worker, no tier above
    backend = services.upstreams.pools.backends[workers.generations[0].url.split("/v1/")[0]]
    assert backend.failures == 0 and METRICS.escalations.labels("small", "large")._value.get() == climbs
    [record] = await wait_for(records, timeout_s=5, what="the timed-out attempt's record")
    assert _billed([record]) == {call.ctx.request_id: ("small", 30, 1500)} and record.usage_source == "worker"


async def test_a_timeout_before_any_token_is_a_fault_and_its_prompt_is_billed(build):
    """Finding 2: a worker that timed out before its first token is a fault (the next worker
    answers), and what it did process (the prompt) is billed under that attempt's id."""
    make, records = build
    steps = [("timeout", 30, 0), ("ok", 30, 5)]
    services, workers = make([tier("small", 1, [A, B])], {A: steps, B: steps})
    call = chat_call(services, KEY, model="small")
    assert (await serve(services, call)).status == 200
    slow = workers.generations[0].url.split("/v1/")[0]
    rid = call.ctx.request_id
    billed = await wait_for(lambda: len(r := records()) == 2 and r, timeout_s=5, what="both attempts' records")
    assert _billed(billed) == {rid: ("small", 30, 0), f"{rid}.2": ("small", 30, 5)}
    assert services.upstreams.pools.backends[slow].failures == 1


async def test_a_batch_line_run_again_after_a_transient_failure_is_billed(build):
    """Finding 2 (batch line retries): the first run of a line met 502s after admission (billed
    nothing, as nothing was generated) and was put off; the run that then succeeded is billed
    (45d8644: both runs used `{batch}-{index}`, and the second's settle was dropped as a repeat)."""
    make, records = build
    services, workers = make([tier("small", 1, [A])], {A: [("fail", 502, 0, 0), ("ok", 8, 6)]},
                             failover={"max_attempts": 1})
    tenant = services.sinks.policy.authenticate(f"Bearer {KEY}")
    line = BatchLine("c-1", "/v1/chat/completions", {"model": "small", "messages": [{"role": "user", "content": "hi"}]})

    async def run():
        return await run_line(lambda call, gate: serve(services, call, Delivery(), gate), tenant, "batch_abc", 0,
                              line, None)

    with pytest.raises(TryLater):
        await run()
    result = await run()
    assert result.ok and (result.input_tokens, result.output_tokens) == (8, 6)
    [record] = await wait_for(records, timeout_s=5, what="the successful run's record")
    assert (record.prompt_tokens, record.completion_tokens) == (8, 6)
    first, second = (s.headers["x-request-id"] for s in workers.generations)
    assert first != second and all(i.startswith("batch_abc-0.") for i in (first, second))
    assert json.loads(result.line)["response"]["request_id"] == second


async def test_the_reservation_covers_every_attempt_at_the_dearest_reachable_tier(build):
    """Finding 2: a request may be billed up to max_attempts generations, on any tier it may
    climb to; while it runs, its reservation holds that much (45d8644: one generation's worth)."""
    make, _ = build
    tiers = [tier("small", 1, [A], price=(1.0, 2.0)), tier("large", 2, [B], price=(10.0, 20.0))]
    answering = asyncio.Event()
    services, workers = make(tiers, {A: [("held", answering, 5, 5)], B: []},
                             failover={"escalate": True, "max_attempts": 3}, budgets={"daily_usd": {"hard": 100}})
    call = chat_call(services, KEY, model="small", max_tokens=100)
    task = asyncio.create_task(serve(services, call))
    await wait_for(lambda: workers.generations, timeout_s=5, what="the request at its worker")
    client = aioredis.from_url(SHARED_REDIS)
    try:
        held = await client.hget(KeySpace(services.config.redis.key_prefix).reserved_amounts("acme"),
                                 call.ctx.request_id)
    finally:
        await client.aclose()
        answering.set()
    assert (await task).status == 200
    bound = prompt_token_bound(parse_chat(call.body))
    assert int(held) == 3 * (bound * 10 + 100 * 20)  # micro-USD: 3 attempts at large's price
