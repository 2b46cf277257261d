"""open_upstream(): the failover loop, in process against scripted workers. A worker fault (a
refused connection, 502/503/504) moves on to another worker, then up the route's escalation path
only; any other 5xx is a suspicion that a second worker settles; a full queue blames no one and
never climbs; the retry budget caps retries; `Tried` carries the attempts either way; each tier
gets a body of its own."""
from __future__ import annotations

import json
import time
from collections import Counter

import aiohttp
import pytest

from gateway.api.handlers import build_request
from gateway.core.metrics import METRICS
from gateway.core.upstream import PATHS, Ask, Tried, open_upstream
from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support.in_process import chat_call, services_for
from tests.support.scripted_transport import Reply, ScriptedTransport, Sent, chat_answer
from wire.errors import OpenAIError

OK, REFUSED, FULL = "ok", "refused", "full"
POISON = "zebra-poison-7"  # a request holding it fails with a 500 on every worker (a worker bug)
A, B, C = "http://a.test", "http://b.test", "http://c.test"


def _error(status: int, message: str, code: str | None = None, headers: dict | None = None) -> Reply:
    return Reply(status, {"error": {"message": message, "type": "server_error", "param": None, "code": code}},
                 headers=headers or {})


class Workers:
    """Scripted workers by base URL, each doing what `does[url]` says: OK, REFUSED (the connection
    is refused), FULL (503 overloaded, Retry-After 1) or an HTTP status to fail with. `seen` and
    `served` count the requests each got and answered; none counts tokens (an abort is a 404)."""

    def __init__(self, does: dict[str, object]):
        self.does = does
        self.seen: Counter[str] = Counter()
        self.served: Counter[str] = Counter()
        self.transport = ScriptedTransport(self.answer)

    @property
    def generations(self) -> list[Sent]:
        return [s for s in self.transport.sent if "/v1/internal/" not in s.url]

    def answer(self, sent: Sent) -> Reply:
        url = sent.url.split("/v1/")[0]
        if "/v1/internal/" in sent.url:
            return _error(404, "no such request here")
        self.seen[url] += 1
        does = self.does[url]
        if does == REFUSED:
            raise aiohttp.ClientConnectionError(f"cannot connect to {url}: connection refused")
        if does == FULL:
            return _error(503, f"{url}: the queue is full", "overloaded", {"Retry-After": "1"})
        if isinstance(does, int):
            return _error(does, f"{url} failing on purpose")
        if POISON in sent.body.decode():
            return _error(500, f"{url} tripped on the request")
        if sent.json["model"] == "reject-me":
            return _error(404, "model rejected upstream", "model_not_found")
        self.served[url] += 1
        return Reply(body=chat_answer())


def _build(redis_prefix: str, tiers: list[dict], does: dict[str, object], **sections):
    workers = Workers(does)
    return services_for(base_config(tiers, redis_prefix, **sections), workers.transport), workers


async def _open(services, key: str | None = None, **body) -> Tried:
    """open_upstream for one chat request; an answer that opened is given back at once, as
    conclude() would, so the next pick sees the worker idle again."""
    request = build_request(services, chat_call(services, key, **body))
    ask = Ask(request.id, request.route, PATHS["chat"], request.body, request.stream, request.max_tokens)
    tried = await open_upstream(services.upstreams, services.config, ask)
    if tried.opened is not None:
        tried.opened.backend.on_done()
        tried.opened.response.release()
    return tried


async def _refused(services, key: str | None = None, **body) -> OpenAIError:
    tried = await _open(services, key, **body)
    assert tried.opened is None and isinstance(tried.error, OpenAIError), tried.error
    return tried.error


def _closed(services, *urls: str) -> bool:
    now = time.monotonic()
    backends = [services.upstreams.pools.backends[u] for u in urls]
    return all(b.breaker_state(now) == "closed" and b.failures == 0 for b in backends)


async def test_5xx_and_refused_connections_retry_on_another_worker(redis_prefix):
    services, workers = _build(redis_prefix, [tier("t", 1, [A, B, C])], {A: 502, B: REFUSED, C: OK},
                               failover={"max_attempts": 3, "escalate": False})
    retries = METRICS.retries.labels("t")._value.get()
    for _ in range(4):
        tried = await _open(services, model="t")
        assert tried.error is None and tried.opened.backend.url == C
    assert workers.served == {C: 4} and workers.seen[A] + workers.seen[B] >= 1
    assert METRICS.retries.labels("t")._value.get() > retries


async def test_escalates_to_next_tier_when_a_tier_cannot_answer(redis_prefix):
    services, workers = _build(redis_prefix, [tier("small", 1, [A]), tier("large", 2, [B])], {A: 500, B: OK})
    escalations = METRICS.escalations.labels("small", "large")._value.get()
    tried = await _open(services, model="small")
    assert tried.opened.tier.name == "large" and tried.opened.tier.model == "model-large"
    assert [s.json["model"] for s in workers.generations] == ["model-small", "model-large"]
    assert METRICS.escalations.labels("small", "large")._value.get() == escalations + 1


async def test_without_escalation_exhausted_attempts_give_503_openai_error(redis_prefix):
    services, workers = _build(redis_prefix, [tier("small", 1, [A]), tier("large", 2, [B])], {A: 503, B: OK},
                               failover={"max_attempts": 2, "escalate": False})
    err = await _refused(services, model="small")
    assert err.status == 503 and err.code == "upstream_unavailable"
    assert int(err.headers["Retry-After"]) >= 1  # the documented 503 says when to come back
    assert workers.seen[B] == 0


async def test_tried_carries_the_attempts_on_success_and_on_error(redis_prefix):
    services, workers = _build(redis_prefix, [tier("small", 1, [A]), tier("large", 2, [B])], {A: 502, B: OK})
    tried = await _open(services, model="small")
    attempts, large = tried.attempts, services.upstreams.pools.backends[B]
    assert (attempts.count, attempts.tier.name, attempts.backend) == (2, "large", large) and attempts.upstream_s > 0
    assert tried.opened.backend is large and tried.answer() is tried.opened
    workers.does[B] = REFUSED
    tried = await _open(services, model="small")
    attempts = tried.attempts
    assert tried.opened is None and isinstance(tried.error, OpenAIError) and tried.error.status == 503
    assert (attempts.count, attempts.tier.name, attempts.backend) == (2, "large", large) and attempts.upstream_s > 0
    with pytest.raises(OpenAIError):
        tried.answer()


async def test_each_tier_gets_its_model_its_max_tokens_cap_and_a_usage_chunk(redis_prefix):
    small = {**tier("small", 1, [A]), "max_tokens_cap": 30}
    services, workers = _build(redis_prefix, [small, tier("large", 2, [B])], {A: 502, B: OK})
    tried = await _open(services, model="small", stream=True, stream_options={"include_usage": False},
                        max_completion_tokens=100, max_tokens=200)
    assert tried.opened.tier.name == "large" and tried.opened.body  # a stream's first bytes
    asked = [s.json for s in workers.generations]
    assert [(b["model"], b["max_completion_tokens"], b["max_tokens"]) for b in asked] == [
        ("model-small", 30, 30), ("model-large", 100, 100)]
    assert all(b["stream_options"] == {"include_usage": True} for b in asked)


async def test_a_full_queue_never_opens_a_breaker_and_the_client_is_told_to_retry(redis_prefix):
    services, workers = _build(redis_prefix, [tier("t", 1, [A, B]), tier("large", 2, [C])], {A: FULL, B: OK, C: OK},
                               breaker={"failure_threshold": 2, "open_s": 30})
    for _ in range(6):  # the spare worker takes what the full one turns away
        assert (await _open(services, model="t")).opened.tier.name == "t"
    assert workers.seen[A] >= 2 and workers.served[B] == 6
    workers.does[B] = FULL
    for _ in range(3):  # the whole tier is full: retry later, and no climb to the tier above
        err = await _refused(services, model="t")
        assert err.status == 503 and err.code == "overloaded", err.message
        assert err.headers["Retry-After"] == "1" and "'t' is overloaded" in err.message
    assert _closed(services, A)
    workers.does[A] = workers.does[B] = OK
    for _ in range(4):  # once it has room, the worker that was full is asked again
        assert (await _open(services, model="t")).error is None
    assert workers.served[A] >= 1 and workers.seen[C] == 0


async def test_poison_request_costs_two_attempts_and_leaves_both_workers_healthy(redis_prefix):
    services, workers = _build(redis_prefix, [tier("t", 1, [A, B])], {A: OK, B: OK},
                               breaker={"failure_threshold": 2, "open_s": 30})
    poisoned = [{"role": "user", "content": f"please {POISON}"}]
    for round_ in range(5):
        err = await _refused(services, model="t", messages=poisoned)
        assert err.status == 400 and err.code == "request_failed_upstream"
        assert "tripped on the request" in err.message  # the upstream's own words
        assert workers.seen.total() == 2 * (round_ + 1)  # two attempts, never a third
        assert _closed(services, A, B)
    for _ in range(4):  # everyone else is still served by both workers
        assert (await _open(services, model="t")).error is None
    assert workers.served[A] >= 1 and workers.served[B] >= 1


async def test_poison_on_every_tier_stops_after_the_second_tier(redis_prefix):
    tiers = [tier("small", 1, [A]), tier("mid", 2, [B]), tier("large", 3, [C])]
    services, workers = _build(redis_prefix, tiers, {A: OK, B: OK, C: OK}, failover={"max_attempts": 3})
    err = await _refused(services, model="small", messages=[{"role": "user", "content": POISON}])
    assert err.status == 400 and err.code == "request_failed_upstream"
    assert (workers.seen[A], workers.seen[B], workers.seen[C]) == (1, 1, 0)
    assert _closed(services, A, B, C)


async def test_a_5xx_another_worker_does_not_repeat_counts_against_the_worker(redis_prefix):
    services, workers = _build(redis_prefix, [tier("t", 1, [A, B])], {A: 500, B: OK},
                               breaker={"failure_threshold": 1, "open_s": 30})
    for _ in range(3):
        assert (await _open(services, model="t")).error is None
    assert services.upstreams.pools.backends[A].breaker_state(time.monotonic()) == "open"
    assert workers.seen[A] == 1  # open after the first convicted failure: not tried again


async def test_retry_budget_refuses_retries_past_its_share(redis_prefix):
    services, workers = _build(redis_prefix, [tier("t", 1, [A, B])], {A: 502, B: OK},
                               failover={"retry_budget_percent": 0, "min_retries_per_s": 0},
                               breaker={"failure_threshold": 100, "open_s": 30})
    refused = METRICS.retries_refused.labels("t")._value.get()
    outcomes = set()
    for _ in range(6):  # the pool alternates: some requests meet the bad worker first
        tried = await _open(services, model="t")
        if tried.error is None:
            outcomes.add("ok")
        else:
            assert tried.error.status == 503 and "retry budget spent" in tried.error.message
            outcomes.add("refused")
    assert outcomes == {"ok", "refused"} and workers.seen[A] >= 1
    assert METRICS.retries_refused.labels("t")._value.get() > refused


KEYS = {"medium-only": "sk-medium-only-climb-key", "wide": "sk-wide-climb-key"}


@pytest.fixture
def medium_down(redis_prefix):
    """small, medium (its only worker refuses connections) and large; medium alone states
    structured outputs."""
    tenants = {"medium-only": {"keys": [{"id": "k", "sha256": hash_key(KEYS["medium-only"])}],
                               "allowed_tiers": ["medium"]},
               "wide": {"keys": [{"id": "k", "sha256": hash_key(KEYS["wide"])}],
                        "allowed_tiers": ["medium", "large"]}}
    medium = {**tier("medium", 2, [B]), "capabilities": {"structured_outputs": True}}
    return _build(redis_prefix, [tier("small", 1, [A]), medium, tier("large", 3, [C])],
                  {A: OK, B: REFUSED, C: OK}, tenants=tenants)


async def test_a_tenant_whose_only_allowed_tier_is_down_gets_503_and_no_other_tier_is_asked(medium_down):
    services, workers = medium_down
    for model in ("medium", "auto"):
        err = await _refused(services, KEYS["medium-only"], model=model)
        assert err.status == 503 and err.code == "no_allowed_tier_available", err.message
        assert "no allowed tier" in err.message and "(medium)" in err.message
        assert int(err.headers["Retry-After"]) >= 1
    assert workers.seen[A] == 0 and workers.seen[C] == 0


async def test_escalation_skips_a_tier_that_cannot_serve_the_request(medium_down):
    services, workers = medium_down  # large is allowed, but states no structured outputs
    err = await _refused(services, KEYS["wide"], model="medium", response_format={"type": "json_object"})
    assert err.status == 503 and err.code == "no_allowed_tier_available", err.message
    assert workers.seen[C] == 0


async def test_an_allowed_escalation_still_happens(medium_down):
    services, workers = medium_down
    tried = await _open(services, KEYS["wide"], model="medium")
    assert tried.error is None and tried.opened.tier.name == "large" and tried.opened.response.status == 200
    assert workers.served[C] == 1 and workers.seen[A] == 0
    assert json.loads(tried.opened.body)["choices"][0]["message"]["content"] == "ok"
