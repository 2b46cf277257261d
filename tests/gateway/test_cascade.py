"""The cascade (issue 54): the routed tier answers first with logprobs, and its own confidence
decides whether the next usable tier up is asked once. Through an in-process gateway over
scripted workers whose token logprobs each test scripts, with the real policy, ledger and usage
log in Redis and on disk."""
from __future__ import annotations

import asyncio
import glob
import json

import aiohttp
import pytest

from classifier.cascade_confidence import TOP_LOGPROBS
from gateway.core.metrics import METRICS
from policies.routing_policy import CASCADE_THRESHOLD
from policies.keys import hash_key
from policies.usage_log import read_records
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for
from tests.support.scripted_transport import Reply, ScriptedTransport, Sent, sse
from wire.prompt_bound import prompt_token_bound
from wire.requests import parse_chat

SMALL, MEDIUM, LARGE = "http://small.test", "http://medium.test", "http://large.test"
# per-token logprobs; with no rivals listed the margin they allow (classifier/cascade_confidence.py) is
# +4.6 and -2.9 nats, either side of the threshold
SURE, UNSURE = -0.01, -3.0
PROMPT = 9
HI = [{"role": "user", "content": "hi"}]
# What admission reserves for one answer of 1,000 tokens: 3 attempts (failover's default) at large's prices
ONE_ANSWER_USD = 3 * (prompt_token_bound(parse_chat({"model": "auto", "messages": HI})) * 3.0 + 1000 * 6.0) / 1e6
TENANTS = {  # name -> its policy, besides its key
    "allow": {},
    "on": {"routing": {"cascade": {"mode": "on"}}},
    "off": {"routing": {"cascade": {"mode": "off"}}},
    "small-only": {"max_tier": "small"},
    "skip-medium": {"allowed_tiers": ["small", "large"]},
    "upto-medium": {"max_tier": "medium"},
    "held": {"routing": {"cascade": {"hold_tokens": 2, "hold_whole_max_tokens": 4}}},
    "one-answer": {"budgets": {"daily_usd": {"hard": round(1.5 * ONE_ANSWER_USD, 6)}}},  # one fits, two do not
}


def _key(name: str) -> str:
    return f"sk-cascade-{name}-key"


class Workers:
    """Scripted workers, one per tier: each answers with as many tokens as `logprobs[url]` lists,
    each token with that logprob (sent only when the request asks for logprobs), whole or
    streamed one chunk per token; their abort endpoint answers with the count of what they sent."""

    def __init__(self):
        self.logprobs = {SMALL: [SURE] * 4, MEDIUM: [SURE] * 3, LARGE: [SURE] * 2}
        self.counts: dict[str, int] = {}
        self.broken: str | None = None
        self.stall: asyncio.Event | None = None  # set: small's streams send one chunk and then stall
        self.transport = ScriptedTransport(self.answer)

    def down(self, url: str) -> None:
        """Generations sent to `url` from now on are answered 502 (a worker fault)."""
        self.broken = url

    def generations(self, url: str | None = None) -> list[Sent]:
        return [s for s in self.transport.sent if s.method == "POST" and "/v1/internal/" not in s.url
                and (url is None or s.url.startswith(url))]

    def answer(self, sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(body={"status": "ok"} if sent.url.endswith("/health") else {"object": "list", "data": []})
        if "/v1/internal/requests/" in sent.url:
            attempt = sent.url.split("/v1/internal/requests/")[1].split("/abort")[0]
            done = self.counts.get(attempt)
            return Reply(body={"finished": True, "usage": {"prompt_tokens": PROMPT, "completion_tokens": done}}) \
                if done is not None else Reply(404, {"error": {"message": "no such request"}})
        url, body = sent.url.split("/v1/")[0], sent.json
        if url == self.broken:
            return Reply(502, {"error": {"message": f"{url} is down"}})
        values, name = self.logprobs[url], url.split("//")[1].split(".")[0]
        self.counts[sent.headers["x-request-id"]] = len(values)
        usage = {"prompt_tokens": PROMPT, "completion_tokens": len(values), "total_tokens": PROMPT + len(values)}
        if sent.url.endswith("/v1/completions"):  # whole text completions: logprobs as a count
            tokens = [f"{name}{i}" for i in range(len(values))]
            asked = body.get("logprobs") is not None
            return Reply(body={"id": "t", "object": "text_completion", "model": body["model"], "usage": usage,
                               "choices": [{"index": 0, "text": "".join(tokens), "finish_reason": "stop",
                                            "logprobs": {"tokens": tokens, "token_logprobs": values} if asked else None}]})
        if not body.get("stream"):
            content = [{"token": f"{name}{i}", "logprob": v, "bytes": None, "top_logprobs": []}
                       for i, v in enumerate(values)]
            return Reply(body={"id": "c", "object": "chat.completion", "model": body["model"], "usage": usage,
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": "".join(
                                                t["token"] for t in content)},
                                            "logprobs": {"content": content} if body.get("logprobs") else None}]})
        chunks = [{"id": "s", "object": "chat.completion.chunk", "model": body["model"],
                   "choices": [{"index": 0, "delta": {"content": f"{name}{i}"}, "finish_reason": None,
                                "logprobs": {"content": [{"token": f"{name}{i}", "logprob": v, "top_logprobs": []}]}
                                if body.get("logprobs") else None}]} for i, v in enumerate(values)]
        chunks.append({"id": "s", "object": "chat.completion.chunk", "model": body["model"], "choices": [],
                       "usage": usage})
        first, *rest = sse(*chunks, "[DONE]")
        stall = self.stall if url == SMALL else None
        return Reply(headers={"Content-Type": "text/event-stream"}, body=first, chunks=[] if stall else rest,
                     stall=stall)


@pytest.fixture
async def cascade(gateway, redis_prefix, tmp_path):
    workers = Workers()
    tenants = {name: {"keys": [{"id": "k", "sha256": hash_key(_key(name))}], **policy}
               for name, policy in TENANTS.items()}
    tiers = [{**tier(name, level, [url], price=(level * 1.0, level * 2.0)), "capabilities": {"logprobs": True}}
             for level, (name, url) in enumerate((("small", SMALL), ("medium", MEDIUM), ("large", LARGE)), start=1)]
    doc = base_config(tiers, redis_prefix, tenants=tenants,
                      policy={"usage_log": {"dir": str(tmp_path / "usage"), "fsync": "always"}})
    gw = await gateway(doc, transport=workers.transport)
    records = lambda: read_records(sorted(glob.glob(str(tmp_path / "usage" / "*"))))  # noqa: E731
    async with aiohttp.ClientSession() as http:
        async def post(tenant: str, path: str = "/v1/chat/completions", **body):
            asked = {"/v1/completions": {"prompt": "hi"}, "/v1/responses": {"input": "hi"}}.get(path, {"messages": HI})
            body = {"model": "auto", **asked, **body}
            async with http.post(gw.url + path, json=body,
                                 headers={"Authorization": f"Bearer {_key(tenant)}"}) as answer:
                raw = await answer.read()
                return answer.status, answer.headers, raw
        async def usage(tenant: str) -> dict:
            async with http.get(gw.url + "/v1/usage?days=1", headers={"Authorization": f"Bearer {_key(tenant)}"}) as got:
                return await got.json()
        post.usage = usage
        yield post, workers, records


def _text(raw: bytes) -> str:
    return json.loads(raw)["choices"][0]["message"]["content"]


def _streamed(raw: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in raw.decode().split("\n\n") if line.startswith("data: {")]


async def test_no_cascade_without_opt_in_and_none_where_the_tenant_forbids_it(cascade):
    post, workers, _ = cascade
    workers.logprobs[SMALL] = [UNSURE] * 4
    status, headers, raw = await post("allow")
    assert status == 200 and _text(raw) == "small0small1small2small3"
    assert "x-tiergate-cascade" not in headers
    [sent] = workers.generations()
    assert "logprobs" not in sent.json and "cascade" not in sent.json  # nothing asked that the client did not
    status, _, raw = await post("off", cascade=True)
    assert status == 403 and json.loads(raw)["error"]["code"] == "cascade_not_allowed"
    assert json.loads(raw)["error"]["param"] == "cascade"
    status, headers, _ = await post("on", cascade=False)
    assert status == 200 and "x-tiergate-cascade" not in headers
    status, _, raw = await post("allow", cascade="yes")
    assert status == 400 and json.loads(raw)["error"]["param"] == "cascade"
    assert len(workers.generations()) == 2  # one each for the two answered requests: no second call


async def test_a_confident_answer_is_kept_and_an_unsure_one_asked_once_of_the_tier_above(cascade):
    post, workers, _ = cascade
    status, headers, raw = await post("on")
    assert status == 200 and _text(raw) == "small0small1small2small3"
    assert headers["x-tiergate-cascade"].startswith("kept; reason=confident")
    assert json.loads(raw)["choices"][0]["logprobs"] is None  # asked for by the gateway, not the client
    [first] = workers.generations()
    assert first.json["logprobs"] is True and first.json["top_logprobs"] == TOP_LOGPROBS and "cascade" not in first.json
    workers.logprobs[SMALL] = [SURE, UNSURE, SURE, SURE]
    escalated = METRICS.cascade.labels("small", "escalated", "low_confidence")._value.get()
    status, headers, raw = await post("allow", cascade=True)
    assert status == 200 and _text(raw) == "medium0medium1medium2"
    assert headers["x-tiergate-cascade"].startswith("escalated; reason=low_confidence")
    assert headers["x-tiergate-tier"] == "medium"
    assert [s.url.split("/v1/")[0] for s in workers.generations()] == [SMALL, SMALL, MEDIUM]
    assert "logprobs" not in workers.generations()[-1].json  # the answer returned needs none
    assert METRICS.cascade.labels("small", "escalated", "low_confidence")._value.get() == escalated + 1


async def test_client_requested_logprobs_are_kept(cascade):
    post, workers, _ = cascade
    status, _, raw = await post("on", logprobs=True)
    assert status == 200
    assert [t["logprob"] for t in json.loads(raw)["choices"][0]["logprobs"]["content"]] == [SURE] * 4


@pytest.mark.parametrize("tenant, climbs_to, header", [
    ("small-only", None, "skipped; reason=no_higher_tier"),  # max_tier small: one answer, and the header says why
    ("skip-medium", LARGE, "escalated; reason=low_confidence"),  # the next tier it may use is large
    ("upto-medium", MEDIUM, "escalated; reason=low_confidence"),  # one up, however unsure medium is too
])
async def test_escalation_stays_within_max_tier_and_the_usable_tiers(cascade, tenant, climbs_to, header):
    post, workers, _ = cascade
    workers.logprobs = {url: [UNSURE] * 3 for url in (SMALL, MEDIUM, LARGE)}
    status, headers, _ = await post(tenant, cascade=True)
    assert status == 200 and headers["x-tiergate-cascade"].startswith(header.split(";")[0])
    assert header.split("; ")[1] in headers["x-tiergate-cascade"]
    assert [s.url.split("/v1/")[0] for s in workers.generations()] == [SMALL] + ([climbs_to] if climbs_to else [])


async def test_both_attempts_are_billed_once_each_in_the_ledger_and_the_usage_log(cascade):
    post, workers, records = cascade
    workers.logprobs[SMALL] = [UNSURE] * 4
    status, headers, _ = await post("allow", cascade=True)
    assert status == 200
    rid = headers["x-request-id"]
    billed = await wait_for(lambda: len(r := records()) == 2 and r, timeout_s=5, what="both attempts' records")
    assert {(r.request_id, r.tier, r.prompt_tokens, r.completion_tokens, r.cascade) for r in billed} == {
        (rid, "small", PROMPT, 4, "escalated:low_confidence"), (f"{rid}.2", "medium", PROMPT, 3, "escalated:low_confidence")}
    [day] = (await post.usage("allow"))["days"]
    assert {tier: (t["requests"], t["prompt_tokens"], t["completion_tokens"]) for tier, t in day["tiers"].items()
            if t["requests"]} == {"small": (1, PROMPT, 4), "medium": (1, PROMPT, 3)}


async def test_a_budget_for_one_answer_but_not_two_is_refused_at_admission_naming_the_cascade(cascade):
    post, workers, _ = cascade
    status, _, raw = await post("one-answer", cascade=True, max_tokens=1000)
    error = json.loads(raw)["error"]
    assert status == 429 and error["code"] == "budget_exceeded" and error["param"] == "cascade"
    assert "cascade" in error["message"] and not workers.generations()
    status, _, _ = await post("one-answer", max_tokens=1000)
    assert status == 200


async def test_a_stream_holds_the_first_tiers_tokens_then_streams_the_chosen_answer(cascade):
    post, workers, records = cascade
    status, headers, raw = await post("held", cascade=True, stream=True, max_tokens=50)  # holds 2 tokens
    chunks = _streamed(raw)
    assert status == 200, raw
    assert headers["x-tiergate-cascade"].startswith("kept; reason=confident")
    assert float(headers["x-tiergate-cascade-held-ms"]) >= 0
    assert "".join(c["choices"][0]["delta"]["content"] for c in chunks if c["choices"]) == "small0small1small2small3"
    assert all(c["choices"][0]["logprobs"] is None for c in chunks if c["choices"])
    workers.logprobs[SMALL] = [SURE, UNSURE, SURE, SURE]
    status, headers, raw = await post("held", cascade=True, stream=True, max_tokens=50)
    chunks = _streamed(raw)
    assert headers["x-tiergate-cascade"].startswith("escalated") and headers["x-tiergate-tier"] == "medium"
    assert "".join(c["choices"][0]["delta"]["content"] for c in chunks if c["choices"]) == "medium0medium1medium2"
    rid = headers["x-request-id"]
    billed = await wait_for(lambda: [r for r in records() if r.request_id.startswith(rid)] or None, timeout_s=5,
                            what="the escalated stream's records")
    assert sorted((r.request_id, r.tier) for r in billed) == [(rid, "small"), (f"{rid}.2", "medium")]


async def test_a_worker_error_on_the_first_attempt_fails_over_as_without_a_cascade(cascade):
    post, workers, _ = cascade
    workers.down(SMALL)
    status, headers, _ = await post("on", cascade=False)
    assert (status, headers["x-tiergate-tier"]) == (200, "medium")  # failover to the tier above, as ever
    status, headers, raw = await post("on")
    assert (status, headers["x-tiergate-tier"], _text(raw)) == (200, "medium", "medium0medium1medium2")
    assert headers["x-tiergate-cascade"].startswith("kept; reason=confident")  # medium answered first
    assert [s.url.split("/v1/")[0] for s in workers.generations()] == [SMALL, MEDIUM, SMALL, MEDIUM]


@pytest.mark.parametrize("tenant, body, says", [
    ("allow", {}, {"runs": False, "reason": "not_asked"}),
    ("allow", {"cascade": True}, {"runs": True, "from": "small", "to": "medium", "threshold": CASCADE_THRESHOLD,
                                  "threshold_source": {"source": "static"}, "hold_tokens": 32}),
    ("skip-medium", {"cascade": True}, {"runs": True, "from": "small", "to": "large",
                                        "threshold": CASCADE_THRESHOLD, "threshold_source": {"source": "static"},
                                        "hold_tokens": 32}),
    ("small-only", {"cascade": True}, {"runs": False, "from": "small", "to": None, "reason": "no_higher_tier"}),
    ("on", {"model": "small"}, {"runs": False, "from": "small", "to": "medium", "reason": "explicit_model"}),
])
async def test_the_route_dry_run_says_whether_a_cascade_would_run_and_to_which_tier(cascade, tenant, body, says):
    post, workers, _ = cascade
    status, _, raw = await post(tenant, "/v1/route", max_tokens=1000, **body)
    assert status == 200 and json.loads(raw)["cascade"] == says
    assert not workers.generations()


async def test_a_client_that_leaves_while_the_stream_is_held_is_billed_the_workers_count(cascade):
    post, workers, records = cascade
    workers.stall = asyncio.Event()  # small sends its first token, then nothing
    request = asyncio.create_task(post("held", cascade=True, stream=True, max_tokens=50))
    await wait_for(workers.stall.is_set, timeout_s=5, what="the held stream stalled")
    request.cancel()
    [record] = await wait_for(records, timeout_s=5, what="the held attempt's record")
    [generation] = workers.generations()
    assert (record.request_id, record.tier, record.completion_tokens, record.usage_source) == (
        generation.headers["x-request-id"], "small", 4, "worker")  # the worker's own count, asked at its abort route
    assert any("/abort" in s.url for s in workers.transport.sent)


async def test_text_completions_cascade_on_the_chosen_tokens_logprobs(cascade):
    post, workers, _ = cascade
    workers.logprobs[SMALL] = [UNSURE, SURE]
    status, headers, raw = await post("on", "/v1/completions")
    assert status == 200 and headers["x-tiergate-cascade"].startswith("escalated; reason=low_confidence")
    assert json.loads(raw)["choices"][0]["text"] == "medium0medium1medium2"
    first, second = workers.generations()
    assert first.json["logprobs"] == TOP_LOGPROBS and "logprobs" not in second.json  # the chosen token and its rival


async def test_an_unsure_answer_is_kept_when_no_worker_above_answers(cascade):
    post, workers, records = cascade
    workers.logprobs[SMALL] = [UNSURE] * 4
    workers.down(MEDIUM)
    status, headers, raw = await post("upto-medium", cascade=True)  # large is past its max_tier
    assert (status, headers["x-tiergate-tier"], _text(raw)) == (200, "small", "small0small1small2small3")
    assert headers["x-tiergate-cascade"].startswith("kept; reason=upper_unavailable")
    assert not [s for s in workers.generations() if s.url.startswith(LARGE)]
    [record] = await wait_for(records, timeout_s=5, what="the kept answer's record")
    assert (record.request_id, record.tier, record.completion_tokens) == (headers["x-request-id"], "small", 4)


@pytest.mark.parametrize("path, body", [("/v1/messages", {"max_tokens": 50}), ("/v1/responses", {"store": False})])
async def test_the_translating_endpoints_take_the_cascade_field(cascade, path, body):
    post, workers, _ = cascade
    workers.logprobs[SMALL] = [UNSURE] * 4
    status, headers, raw = await post("allow", path, cascade=True, **body)
    assert status == 200, raw
    assert headers["x-tiergate-cascade"].startswith("escalated") and b"medium0medium1medium2" in raw
