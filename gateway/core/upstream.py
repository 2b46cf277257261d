"""Getting an answer started from some worker: pick, send, and fail over.

Worker faults (connection errors, timeouts, 502/503/504) are retried on another worker of the
tier, then (if configured) on the next tier up of the route's escalation path (only tiers the
request's policy allows and that can serve it), within failover.max_attempts and the retry
budget. A worker's full queue (503 "overloaded" or with Retry-After) is backpressure, not a
fault: another worker of the tier is tried, no breaker counts it, and the request never climbs
for it. Any other 5xx is retried once: if a second worker fails the same way, the request is
at fault and neither worker is blamed (see `_Failover`). Non-streamed answers are
read whole inside the attempt; streamed ones until their first bytes, so the client sees
nothing from a failed attempt.

Every attempt has its own id (`attempt_id`), sent as x-request-id: the worker counts it under it,
and an attempt given up on after the worker had it is stopped there and billed its count
(worker_usage.count_abandoned). A timeout while the worker was generating is the answer's
length, not a fault: the request ends there (504 `answer_timeout`), no breaker counts it and no
tier is climbed for it.
"""
from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass
from typing import Awaitable, Protocol

import aiohttp

from classifier.cascade_confidence import TOP_LOGPROBS
from wire.errors import OpenAIError

from .affinity import AffinityIndex
from ..config import Config, Tier
from .metrics import METRICS
from .pool import Backend, Pools
from .request import max_tokens_on
from .retry_budget import RetryBudget
from .routing import Route
from .trace_spans import upstream_attempt
from .transport import Post, UpstreamResponse
from .usage import AttemptBill, Usage
from .worker_usage import count_abandoned

RETRYABLE = (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)
# An upstream 401/403 refuses the gateway's own key (clients' keys never go upstream): a worker
# failure to fail over from, never a verdict to pass on as if the client's key were wrong.
GATEWAY_CREDENTIALS_REFUSED = (401, 403)
GATEWAY_FAILURES = (502, 503, 504)  # the worker or the way to it failed, whatever the request was
MAX_ERROR_BODY = 64 * 1024
MAX_RETRY_AFTER_S = 60  # a worker's Retry-After passed on to clients is capped here
ANSWER_TIMEOUT = "answer_timeout"  # the code of the 504 for an answer longer than timeouts.read_s
# failures before the worker had the request: nothing to count or bill there
NOT_SENT = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
PATHS = {"chat": "/v1/chat/completions", "completion": "/v1/completions", "embeddings": "/v1/embeddings"}


def attempt_id(request_id: str, number: int) -> str:
    """The id attempt `number` (from 1) of a request is sent and billed under: the request's own
    for the first, `{id}.{number}` for each later one (failover, escalation, a shape re-ask)."""
    return request_id if number == 1 else f"{request_id}.{number}"


@dataclass
class Opened:
    tier: Tier
    backend: Backend
    response: UpstreamResponse
    body: bytes  # the whole body (non-streamed) or the first bytes (streamed)
    attempt_id: str = ""  # what the worker knows this attempt by


@dataclass(frozen=True, slots=True)
class Attempts:
    """How far the failover loop got: when no worker answers (or the client leaves mid-attempt)
    the last tier tried is still the one the request is billed and counted on."""
    tier: Tier
    count: int = 0  # workers tried (> 1 when the answer came from a failover)
    upstream_s: float = 0.0  # time spent waiting on workers, left out of the gateway's overhead
    backend: Backend | None = None  # the last worker sent the request: asked for its count if the client left
    attempt_id: str | None = None  # the id the last attempt was sent under
    abandoned: tuple[AttemptBill, ...] = ()  # attempts given up on after their worker had them, and their counts

    def then(self, later: "Attempts") -> "Attempts":
        """These attempts followed by `later`'s (a re-ask): counts, waits and bills add up."""
        return Attempts(later.tier, self.count + later.count, self.upstream_s + later.upstream_s,
                        later.backend or self.backend, later.attempt_id or self.attempt_id,
                        self.abandoned + later.abandoned)


@dataclass(frozen=True, slots=True)
class Tried:
    """What opening an upstream came to: the answer that opened, or the error (the client's
    cancellation too), and the attempts either way."""
    attempts: Attempts
    opened: Opened | None = None
    error: BaseException | None = None

    def answer(self) -> Opened:
        if self.error is not None:
            raise self.error
        return self.opened


@dataclass(frozen=True, slots=True)
class Ask:
    """What one request asks of the workers, the same on every attempt; the body a tier
    receives is built here, when that tier is tried."""
    request_id: str
    route: Route
    path: str
    body: dict        # the client's JSON
    stream: bool
    max_tokens: int   # asked for or the default (request.max_tokens_on caps it per tier); 0: embeddings
    first_attempt: int = 1  # the number of its first attempt here (a re-ask continues the request's)
    logprobs: bool = False  # the cascade's first attempt: the chosen tokens' logprobs and top lists are asked for

    def body_for(self, tier: Tier) -> bytes:
        out = dict(self.body)
        out["model"] = tier.model
        if self.route.cache_salt:
            out["cache_salt"] = self.route.cache_salt
        out.pop("cascade", None)  # the gateway's own field
        if self.logprobs and not out.get("logprobs"):
            # the cascade's confidence reads each token's best rival: the top list (completions: its length)
            if self.path == PATHS["chat"]:
                out["logprobs"], out["top_logprobs"] = True, TOP_LOGPROBS
            else:
                out["logprobs"] = TOP_LOGPROBS
        if self.stream:
            # Always ask for usage so cost is exact; the gateway drops that chunk if the client did not ask.
            out["stream_options"] = {**(out.get("stream_options") or {}), "include_usage": True}
        if self.max_tokens:
            limit = max_tokens_on(self.max_tokens, self.route.decision, tier)
            named = [n for n in ("max_tokens", "max_completion_tokens") if out.get(n) is not None]
            for name in named or ["max_tokens"]:
                out[name] = min(out.get(name) or limit, limit)
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class Upstreams:
    """Everything opening an upstream uses of the process: the pools, the affinity index, the
    retry budget and the transport (`post`). A reload swaps it whole; a request keeps the one it
    began with."""
    pools: Pools
    affinity: AffinityIndex
    retry_budget: RetryBudget
    post: Post


class Opener(Protocol):
    """open_upstream with the process's upstreams already bound: what the quality monitor's
    re-asks get instead of the process state."""

    def __call__(self, config: Config, ask: Ask) -> Awaitable[Tried]: ...


def _record_affinity(tier: Tier, result: str, had_keys: bool) -> None:
    if had_keys:
        METRICS.affinity.labels(tier.name, "miss" if result == "none" else result).inc()


async def choose(upstreams: Upstreams, config: Config, route: Route, tier: Tier, tried: set[str]):
    """The pool's pick for this tier, with the affinity index consulted (read only)."""
    keys = route.keys_for(tier, config)
    preferred = await upstreams.affinity.lookup(keys, config.redis) if keys else None
    pick = upstreams.pools.by_tier[tier.name].pick(tried, preferred, config.affinity.load_margin)
    return pick, keys


async def open_upstream(upstreams: Upstreams, config: Config, ask: Ask) -> Tried:
    """The failover loop. It never raises: the answer that opened, or what went wrong (the
    client's cancellation too), comes back with the attempts it took."""
    failover = _Failover(upstreams, config, ask)
    try:
        opened = await failover.run()
    except BaseException as exc:  # noqa: BLE001 - the caller decides what to raise, after billing
        return Tried(failover.attempts, error=exc)
    return Tried(failover.attempts, opened)


class _Failover:
    """Worker faults (connection errors, timeouts, 502/503/504, a refused gateway key) count
    against the worker and move on. Any other 5xx is only a suspicion until a second worker
    answers: success convicts the first worker, the same status again acquits both and hands the
    error to the client as the request's. A full queue blames no one: the next worker of the tier
    is tried, and when none is left the client is told to retry later. Escalation follows the
    route's escalation path only (the tiers its policy allows)."""

    def __init__(self, upstreams: Upstreams, config: Config, ask: Ask):
        self.upstreams, self.config, self.ask = upstreams, config, ask
        self.tier, self.count, self.upstream_s, self.backend = ask.route.tier, 0, 0.0, None
        self.attempt_id: str | None = None
        self.abandoned: list[AttemptBill] = []

    @property
    def attempts(self) -> Attempts:
        """How far it got, read on any exit."""
        return Attempts(self.tier, self.count, self.upstream_s, self.backend, self.attempt_id, tuple(self.abandoned))

    async def _abandon(self, tier: Tier, backend: Backend, timed_out: bool) -> Usage | None:
        """Stop the attempt at its worker and keep its bill; its count, if any."""
        counted = await count_abandoned(self.upstreams.post, self.ask, self.attempt_id, tier, backend, timed_out)
        if counted is not None and (counted.prompt_tokens or counted.completion_tokens):
            self.abandoned.append(AttemptBill(self.attempt_id, tier, counted))
        return counted

    async def run(self) -> Opened:
        upstreams, config, ask, route = self.upstreams, self.config, self.ask, self.ask.route
        upstreams.retry_budget.on_request()
        tier, tried, last_error = route.tier, set(), "no worker available"
        suspect: _Suspect | None = None
        busy: _UpstreamStatus | None = None  # the last worker of this tier that answered with a full queue
        payloads: dict[str, bytes] = {}
        headers = {"Content-Type": "application/json", "x-tiergate-priority": route.decision.priority}
        while self.count < config.failover.max_attempts:
            pick, keys = await choose(upstreams, config, route, tier, tried)
            if pick is None:
                # a full tier is busy, not down: climbing would pass its load on to the tiers above
                higher = route.next_up(tier) if config.failover.escalate and busy is None else None
                if higher is None:
                    break
                METRICS.escalations.labels(tier.name, higher.name).inc()
                tier = higher
                continue
            if self.count:
                if not upstreams.retry_budget.try_retry(config.failover):
                    METRICS.retries_refused.labels(tier.name).inc()
                    last_error += " (retry budget spent)"
                    break
                METRICS.retries.labels(tier.name).inc()
            backend = self.backend = pick.backend
            self.tier, self.count = tier, self.count + 1
            self.attempt_id = attempt_id(ask.request_id, ask.first_attempt + self.count - 1)
            tried.add(backend.url)
            _record_affinity(tier, pick.affinity, bool(keys))
            if tier.name not in payloads:
                payloads[tier.name] = ask.body_for(tier)
            started = time.perf_counter()
            try:
                with upstream_attempt(tier, backend, self.count) as attempt:
                    opened = await _send(upstreams.post, tier, backend, ask.path, payloads[tier.name],
                                         attempt.headers({**headers, "x-request-id": self.attempt_id,
                                                          **backend.auth_headers}), ask.stream)
                    attempt.answered(opened.response.status)
            except _UpstreamStatus as exc:
                last_error = f"{backend.label}: {exc}"
                if exc.retry_after_s is not None:  # backpressure: the worker is up, its queue is full
                    backend.probing = False
                    busy = exc
                    continue
                await self._abandon(tier, backend, timed_out=False)  # a worker error after it may have begun
                if not exc.suspect:
                    backend.on_failure(time.monotonic(), config.breaker)
                    continue
                backend.probing = False  # a half-open probe that proved nothing either way
                if suspect is not None and suspect.status == exc.status:
                    raise _request_fault(exc, self.count) from None
                suspect = suspect or _Suspect(backend, exc.status)
                continue
            except RETRYABLE as exc:
                last_error = f"{backend.label}: {_fault(exc)}"
                timed_out = isinstance(exc, asyncio.TimeoutError)
                counted = None if isinstance(exc, NOT_SENT) else await self._abandon(tier, backend, timed_out)
                if timed_out and counted is not None and counted.source == "worker" and counted.completion_tokens:
                    backend.on_success()  # it was answering: a long answer, not a fault
                    raise _answer_timeout(config, backend, counted) from None
                backend.on_failure(time.monotonic(), config.breaker)
                continue
            finally:
                self.upstream_s += time.perf_counter() - started
            if suspect is not None and opened.response.status == 200:
                suspect.backend.on_failure(time.monotonic(), config.breaker)  # another worker could answer
            backend.on_success()
            if keys and opened.response.status == 200:
                upstreams.affinity.remember(keys, backend.url, config.affinity.ttl_s, config.redis)
            opened.attempt_id = self.attempt_id
            return opened
        raise _unanswered(config, route, tier, self.count, last_error, busy)


def _fault(exc: BaseException) -> str:
    """A connection fault as a tenant may read it: its kind, never the worker's address (the message's)."""
    kind = "timed out" if isinstance(exc, asyncio.TimeoutError) else \
        "could not connect" if isinstance(exc, NOT_SENT) else "connection failed"
    return f"{kind} ({type(exc).__name__})"


def _answer_timeout(config: Config, backend: Backend, counted: Usage) -> OpenAIError:
    """The answer was still being generated when timeouts.read_s passed: the request's own length."""
    return OpenAIError(504, f"the answer took longer than the gateway's read timeout ({config.timeouts.read_s:g} s): "
                            f"{backend.label} had generated {counted.completion_tokens} token(s), which are billed; "
                            "ask for fewer tokens (max_tokens) or stream the answer", code=ANSWER_TIMEOUT)


def _unanswered(config: Config, route: Route, tier: Tier, count: int, last_error: str,
                busy: "_UpstreamStatus | None") -> OpenAIError:
    """The 503 when no worker answered: the tier is overloaded, none of the tiers the request may
    use is up while tiers outside its policy are left untried, or every tier is down."""
    if busy is not None:
        return OpenAIError(503, f"tier {tier.name!r} is overloaded: a worker's queue is full and no other worker of "
                                f"the tier could take the request; retry after {busy.retry_after_s} s (last error: "
                                f"{last_error})", code="overloaded",
                           headers={"Retry-After": str(busy.retry_after_s)})
    # a worker is retried once its breaker half-opens or the next health check passes
    retry_after = str(max(1, math.ceil(min(config.breaker.open_s, config.health.interval_s))))
    if config.failover.escalate and route.next_up(tier) is None and config.tiers_above(tier):
        may_use = [t.name for t in (route.tier, *route.escalation_path) if t.level >= route.tier.level]
        return OpenAIError(503, f"no allowed tier is available: the tiers this request may use ({', '.join(may_use)}) "
                                f"have no worker that answered ({count} attempt(s)); the tiers above them are outside "
                                f"the tenant's policy or cannot serve this request, so they are not tried; last "
                                f"error: {last_error}",
                           code="no_allowed_tier_available", headers={"Retry-After": retry_after})
    return OpenAIError(503, f"no upstream worker could answer after {count} attempt(s); last error: {last_error}",
                       code="upstream_unavailable", headers={"Retry-After": retry_after})


async def _send(post: Post, tier: Tier, backend: Backend, path: str, payload: bytes,
                headers: dict, stream: bool) -> Opened:
    """One attempt on one worker: its whole answer (or a stream's first bytes), or the failure."""
    backend.on_pick(time.monotonic())
    response = None
    try:
        response = await post(backend.url_for(path), data=payload, headers=headers)
        if response.status >= 500 or response.status in GATEWAY_CREDENTIALS_REFUSED:
            raise _UpstreamStatus(response.status, await response.content.read(MAX_ERROR_BODY),
                                  response.headers.get("Retry-After"))
        data = await (response.read() if not stream or response.status != 200 else _first_bytes(response))
    except asyncio.CancelledError:  # client went away: drop the upstream request too
        backend.on_done()
        backend.probing = False  # a cancelled half-open probe proves nothing either way
        if response is not None:
            response.close()
        raise
    except (*RETRYABLE, _UpstreamStatus) as exc:
        backend.on_done()
        if response is not None:
            response.close()
        kind = exc.kind if isinstance(exc, _UpstreamStatus) else type(exc).__name__
        METRICS.upstream_errors.labels(tier.name, backend.label, kind).inc()
        raise
    return Opened(tier, backend, response, data)


@dataclass
class _Suspect:
    backend: Backend
    status: int


def _request_fault(exc: "_UpstreamStatus", attempts: int) -> OpenAIError:
    """Two workers failed this request the same way: the request's fault, not theirs."""
    return OpenAIError(400, f"the request failed the same way on {attempts} workers (HTTP {exc.status}): "
                            f"{exc.upstream_message}", code="request_failed_upstream")


async def _first_bytes(response: UpstreamResponse) -> bytes:
    data = await response.content.readany()
    if not data:
        raise aiohttp.ClientPayloadError("upstream closed the stream before sending anything")
    return data


class _UpstreamStatus(Exception):
    def __init__(self, status: int, body: bytes, retry_after: str | None = None):
        self.status = status
        self.upstream_message, code = _error_message(body)
        super().__init__(f"upstream answered HTTP {status}: {self.upstream_message}")
        # seconds to wait when a worker that answered says its queue is full; None: not backpressure
        self.retry_after_s = _retry_after_s(retry_after) if status == 503 and (
            code == "overloaded" or retry_after is not None) else None
        self.kind = "overloaded" if self.retry_after_s is not None else f"http_{status}"
        # a worker fault for sure (Envoy's gateway errors; a refused key), else a suspicion to check
        self.suspect = status not in GATEWAY_FAILURES and status not in GATEWAY_CREDENTIALS_REFUSED


def _error_message(body: bytes) -> tuple[str, str | None]:
    """The upstream's OpenAI error message (else the start of its body) and its code."""
    try:
        error = json.loads(body)["error"]
        message, code = error["message"], error.get("code")
        if isinstance(message, str):
            return message[:500], code if isinstance(code, str) else None
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return body[:200].decode(errors="replace") or "(empty body)", None


def _retry_after_s(value: str | None) -> int:
    """A worker's Retry-After in whole seconds, within 1..MAX_RETRY_AFTER_S (1 when absent or a date)."""
    try:
        return min(MAX_RETRY_AFTER_S, max(1, math.ceil(float(value))))
    except (TypeError, ValueError, OverflowError):
        return 1
