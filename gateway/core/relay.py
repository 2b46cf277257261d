"""Relaying an upstream answer to the client, reading its token usage, and saying what the
request came to: `relay` opens the upstream (upstream.py), copies its answer and returns the
typed `Outcome` that conclude.py consumes.

Streams are forwarded event by event as they arrive (no buffering beyond one partial SSE
frame). The gateway always asks upstreams for a usage chunk and drops it when the client
did not ask for one. A broken upstream mid-stream ends the client's stream with an
OpenAI-style error event; a client that goes away closes the upstream request. An answer
that came without usage (cut, cancelled, or from an upstream that never reports it) is
counted by worker_usage.py: the worker's own count first.
"""
from __future__ import annotations

import asyncio
import json
import time
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any, Callable

import aiohttp
from aiohttp import web

from wire.errors import OpenAIError
from wire.sse import DONE, error_event, iter_events
from webwire.tracing import traced

from ..config import Config, Tier
from .cascade import ESCALATED, KEPT, SKIPPED, CascadePlan, CascadeVerdict, judge, whole_confidence, without_logprobs
from .answer_text import generated_texts
from .cascade_stream import cascade_stream
from .context import CACHE, SERVED_FROM_CACHE, RequestContext
from .metrics import METRICS
from .request import GatewayRequest
from .shape_check import shape_fault, structured_schema
from .transport import Post
from .upstream import PATHS, RETRYABLE, Ask, Attempts, Opened, Upstreams, open_upstream
from .usage import MAX_REPORTED_TOKENS, AttemptBill, Usage, reported_in  # noqa: F401 (its tests read them here)
from .worker_usage import count_unreported

MAX_PENDING_FRAME = 1 << 20  # one SSE frame larger than this means a broken upstream


@dataclass(frozen=True)
class Outcome:
    """What one request's attempt to answer came to."""
    kind: str              # chat, completion or embeddings
    stream: bool
    served: Tier           # the tier that answered (when none did: the last one tried)
    attempts: int          # workers tried (> 1: failed over)
    opened: Opened | None  # the upstream attempt that answered, None when none did
    usage: Usage           # as reported, or counted by the gateway for a stream without a report
    attempt_id: str        # the attempt `usage` is billed under (the answer's, else the last one sent)
    cut: bool              # a stream that ended before the upstream finished it (client gone, upstream cut)
    stream_error: bool     # a streamed answer carried or ended with an upstream error
    upstream_s: float = 0.0                   # waiting on workers: not the gateway's own overhead
    answer: web.StreamResponse | None = None  # what the client gets...
    error: BaseException | None = None        # ...or what it raised instead
    # attempts billed besides `attempt_id`: answers a shape re-ask replaced, attempts given up on
    other_attempts: tuple[AttemptBill, ...] = ()
    cache: str | None = None                  # hit, semantic, miss or bypass (gateway/cache/); None: not in use
    cascade: CascadeVerdict | None = None     # what the cascade came to; None: not asked for

    @property
    def backend(self) -> str:
        if self.opened is not None:
            return self.opened.backend.label
        return "cache" if self.cache in SERVED_FROM_CACHE else "none"

    def deliver(self, ctx: RequestContext) -> web.StreamResponse:
        """The answer (or the error) with the x-tiergate-* headers of what it came to; a stream
        sent its own when it started."""
        headers = ctx.headers(self.served, self.backend, self.upstream_s)
        if self.cache is not None:
            headers[CACHE] = self.cache
        if self.cascade is not None:
            headers.update(self.cascade.headers())
        if self.error is not None:
            if isinstance(self.error, OpenAIError):
                self.error.headers.update(headers)
            raise self.error
        if not self.answer.prepared:
            self.answer.headers.update(headers)
        return self.answer


@dataclass(frozen=True, slots=True)
class Delivery:
    """Where the answer goes: the HTTP request a stream is written to (None for a batch line:
    whole answers only), the `shaper` of a translating endpoint, and a `tap` that sees each
    streamed payload (the quality monitor's sample)."""
    to: web.Request | None = None
    shaper: Any = None
    tap: Callable[[bytes], None] | None = None
    headers: tuple[tuple[str, str], ...] = ()  # more headers a stream sends as it starts (x-tiergate-cache)


@traced("relay")
async def relay(request: GatewayRequest, upstreams: Upstreams, delivery: Delivery) -> Outcome:
    """Open an upstream and copy its answer to the client. It never raises: whatever went wrong
    (no worker, the client gone) travels in the Outcome, so conclude() always gets one."""
    route, stream, plan = request.route, request.stream, request.cascade
    ask = Ask(request.id, route, PATHS[request.kind], request.body, stream, request.max_tokens, logprobs=plan.runs)
    tried = await open_upstream(upstreams, request.config, ask)
    attempts, opened, error = tried.attempts, tried.opened, tried.error
    usage, streamer, answer = Usage(), None, None
    discarded: tuple[AttemptBill, ...] = ()
    verdict = plan.skipped(route.tier) if not plan.runs else CascadeVerdict(SKIPPED, "upstream_error", route.tier.name)
    try:
        opened = tried.answer()
        if plan.runs and opened.response.status == 200:
            cascade = cascade_stream if stream else _cascade_whole
            opened, discarded, attempts, verdict = await cascade(upstreams, request.config, ask, plan, opened, attempts)
        if not stream and request.kind == "chat":
            opened, reasked, attempts = await _reask_if_misshapen(upstreams, request.config, ask, opened, attempts)
            discarded += reasked
        if stream:
            headers = {**request.ctx.headers(opened.tier, opened.backend.label, attempts.upstream_s),
                       **dict(delivery.headers), **(verdict.headers() if verdict is not None else {})}
            streamer = StreamRelay(delivery, opened, request.include_usage, headers, plan.strip_logprobs)
            answer = await streamer.run()
        else:
            if plan.strip_logprobs:
                opened.body = without_logprobs(opened.body)
            whole, usage = relay_whole(opened)
            answer = await delivery.shaper.whole(whole) if delivery.shaper is not None else whole
    except BaseException as exc:  # cancellation too: the handler re-raises it after finish()
        error = exc
    if streamer is not None:
        usage = streamer.usage
    if not usage.reported:
        usage = await _count_unreported(upstreams.post, ask, opened, attempts, streamer, usage, error)
    billed_as = opened.attempt_id if opened is not None else attempts.attempt_id or request.id
    return Outcome(request.kind, stream, opened.tier if opened is not None else attempts.tier, attempts.count,
                   opened, usage, billed_as, cut=streamer is not None and not streamer.completed,
                   stream_error=streamer is not None and streamer.cut, upstream_s=attempts.upstream_s,
                   answer=answer, error=error, other_attempts=attempts.abandoned + discarded, cascade=verdict)


async def _count_unreported(post: Post, ask: Ask, opened: Opened | None,
                            attempts: Attempts, streamer: "StreamRelay | None", usage: Usage,
                            error: BaseException | None) -> Usage:
    """Usage for an answer that carried none, or for a whole answer cancelled while a worker
    generated it; none counted for a refusal or for a request no worker took."""
    if opened is not None and opened.response.status == 200:
        if streamer is not None:
            opened.response.close()  # a cut stream: the worker stops, then counts
            relayed, estimated = streamer.relayed_text(), streamer.chunks
            cut = not streamer.completed
        elif ask.stream:  # a stream cancelled while the cascade held it back: the worker stops, then counts
            opened.response.close()
            relayed, estimated, cut = [], 0, True
        else:
            with suppress(ValueError, AttributeError):  # the answer a cancelled re-ask left unread
                if (reported := reported_in(json.loads(opened.body))) is not None:
                    return reported
            relayed = generated_texts(opened.body)
            estimated = (len("".join(relayed)) + 3) // 4  # a quarter of its characters, rounded up
            cut = False  # a whole answer read to its end: an upstream that reports no usage
        counted = await count_unreported(post, ask, opened.attempt_id, opened.tier, opened.backend if cut else None,
                                         relayed, estimated)
    elif opened is None and isinstance(error, asyncio.CancelledError) and attempts.backend is not None \
            and all(bill.attempt_id != attempts.attempt_id for bill in attempts.abandoned):  # not billed already
        counted = await count_unreported(post, ask, attempts.attempt_id, attempts.tier, attempts.backend, [], 0)
    else:
        return usage
    return replace(counted, first_token_at=usage.first_token_at)


async def _reask_if_misshapen(upstreams: Upstreams, config: Config, ask: Ask, opened: Opened, attempts: Attempts
                              ) -> tuple[Opened, tuple[AttemptBill, ...], Attempts]:
    """A whole structured answer cut by max_tokens or failing its schema is asked once of the
    next tier up that the tenant may use and that can serve it; the first answer is billed and
    dropped, or kept if no worker up there answers."""
    schema = structured_schema(ask.body)
    route = ask.route
    if schema is None or not route.decision.structured_escalation or opened.response.status != 200:
        return opened, (), attempts
    why = shape_fault(schema, opened.body)
    higher = route.next_up(opened.tier) if why else None  # never past the tenant's policy (Route.escalation_path)
    if higher is None:
        return opened, (), attempts
    reopened, bills, attempts = await _ask_higher(upstreams, config, ask, opened, attempts, higher)
    if reopened is None:
        return opened, (), attempts
    METRICS.shape_escalations.labels(opened.tier.name, higher.name, why).inc()
    return reopened, bills, attempts


async def _cascade_whole(upstreams: Upstreams, config: Config, ask: Ask, plan: CascadePlan, opened: Opened,
                         attempts: Attempts) -> tuple[Opened, tuple[AttemptBill, ...], Attempts, CascadeVerdict]:
    """The cascade on a whole answer: kept when its confidence meets the threshold, else asked
    once of the next tier up the tenant may use (kept if no worker there answers)."""
    higher = ask.route.next_up(opened.tier)  # never past the tenant's policy (Route.escalation_path)
    verdict = judge(plan, opened.tier, whole_confidence(opened.body), higher)
    if verdict.outcome != ESCALATED:
        return opened, (), attempts, verdict
    reopened, bills, attempts = await _ask_higher(upstreams, config, ask, opened, attempts, higher)
    if reopened is None:
        return opened, (), attempts, replace(verdict, outcome=KEPT, reason="upper_unavailable")
    return reopened, bills, attempts, verdict


async def _ask_higher(upstreams: Upstreams, config: Config, ask: Ask, opened: Opened, attempts: Attempts,
                      higher: Tier) -> tuple[Opened | None, tuple[AttemptBill, ...], Attempts]:
    """Ask `higher` once for a whole answer in place of `opened`, which is billed and dropped; None
    (and `opened` kept) when no worker up there answers."""
    _, first = relay_whole(opened)  # its usage, for the bill
    again = await open_upstream(upstreams, config, replace(ask, route=replace(ask.route, tier=higher),
                                                           first_attempt=attempts.count + 1, logprobs=False))
    attempts = attempts.then(again.attempts)
    if isinstance(again.error, OpenAIError):
        return None, (), attempts
    reopened = again.answer()  # the client's cancellation is raised; the first answer is released by conclude
    opened.backend.on_done()
    opened.response.release()
    return reopened, (AttemptBill(opened.attempt_id, opened.tier, first),), attempts


def relay_whole(opened: Opened) -> tuple[web.Response, Usage]:
    """The client's answer for a whole upstream answer, and the usage it reports."""
    response = opened.response
    body = opened.body
    if response.status == 200:
        now = time.perf_counter()
        try:
            usage = reported_in(json.loads(body), now) or Usage(first_token_at=now)
        except (ValueError, AttributeError):
            raise OpenAIError(502, "upstream answered with a body that is not JSON", code="bad_upstream") from None
        return web.Response(body=body, status=200, content_type="application/json"), usage
    # An upstream 4xx is the upstream's verdict on the request: pass its OpenAI error through.
    try:
        json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        raise OpenAIError(response.status, f"upstream rejected the request: {body[:200].decode(errors='replace')}",
                          code="upstream_error") from None
    return web.Response(body=body, status=response.status, content_type="application/json"), Usage()


class StreamRelay:
    def __init__(self, delivery: Delivery, opened: Opened, client_wants_usage: bool, headers: dict[str, str],
                 strip_logprobs: bool = False):
        self.request, self.opened, self.headers = delivery.to, opened, headers
        self.strip_logprobs = strip_logprobs  # the cascade asked for them, not the client
        self.usage = Usage()  # what the stream said so far: its usage chunk, and when its first token came
        self.shaper = delivery.shaper  # optional: turns chat chunks into another wire format's events
        self.tap = delivery.tap  # optional: sees each upstream data payload (quality sampling)
        self.client_wants_usage = client_wants_usage
        self.chunks = 0
        self.cut = False
        self.completed = False
        self.payloads: list[bytes] | None = [] if opened.tier.tokenizer else None  # for the tokenizer's count

    def relayed_text(self) -> list[str]:
        return generated_texts(*self.payloads) if self.payloads is not None else []

    async def run(self) -> web.StreamResponse:
        upstream = self.opened.response
        if upstream.status != 200:  # a 4xx for a stream request: answer it like a whole one
            self.completed = True
            answer, self.usage = relay_whole(self.opened)
            return answer
        client = web.StreamResponse(status=200, headers={**self.headers, "Cache-Control": "no-cache"})
        client.content_type = "text/event-stream"
        await client.prepare(self.request)
        buffer = bytearray(self.opened.body)
        done = False
        try:
            done = await self._forward(client, buffer)
            while not done:
                data = await upstream.content.readany()
                if not data:
                    break
                buffer += data
                if len(buffer) > MAX_PENDING_FRAME:
                    raise aiohttp.ClientPayloadError("upstream SSE frame too large")
                done = await self._forward(client, buffer)
        except (*RETRYABLE, ValueError) as exc:  # ValueError: an upstream frame that is not JSON
            if isinstance(exc, ConnectionResetError) and self.request.transport is None:
                raise  # the client is gone; nothing left to tell it
            await self._end_with_error(client, f"upstream failed mid-stream: {exc}")
            return client
        if not done:
            await self._end_with_error(client, "upstream ended the stream without [DONE]")
            return client
        self.completed = True  # the upstream finished it: a client that leaves during the last bytes cut nothing
        await client.write_eof()
        return client

    async def _forward(self, client: web.StreamResponse, buffer: bytearray) -> bool:
        out = []
        done = False
        for data in iter_events(buffer):
            if data == b"[DONE]":
                out.append(DONE if self.shaper is None else await self.shaper.end())
                done = True
                break
            if self.strip_logprobs:
                data = without_logprobs(data)
            if self.tap is not None:
                self.tap(data)
            if self.payloads is not None:
                self.payloads.append(data)
            if self.shaper is not None:
                out.append(self._shape(json.loads(data)))
                continue
            if b'"usage"' in data or b'"error"' in data:
                obj = json.loads(data)
                if obj.get("error"):
                    self.cut = True
                if obj.get("usage"):
                    self._read_usage(obj)
                    if not obj.get("choices") and not self.client_wants_usage:
                        continue  # the usage chunk the gateway asked for, not the client
            if self.chunks == 0:
                self.usage = replace(self.usage, first_token_at=time.perf_counter())
            self.chunks += 1
            out.append(b"data: " + data + b"\n\n")
        if out:
            await client.write(b"".join(out))
        return done

    def _read_usage(self, obj: dict) -> None:
        reported = reported_in(obj, self.usage.first_token_at)
        if reported is not None:
            self.usage = reported

    def _shape(self, obj: dict) -> bytes:
        if obj.get("error"):
            self.cut = True
        if obj.get("usage"):
            self._read_usage(obj)
        if self.chunks == 0:
            self.usage = replace(self.usage, first_token_at=time.perf_counter())
        self.chunks += 1
        return self.shaper.chunk(obj)

    async def _end_with_error(self, client: web.StreamResponse, message: str) -> None:
        self.cut = True
        METRICS.stream_cut.labels(self.opened.tier.name, self.opened.backend.label).inc()
        self.opened.response.close()
        try:
            await client.write(error_event(message, code="upstream_error") + DONE if self.shaper is None
                               else self.shaper.error(message))
            await client.write_eof()
        except (ConnectionError, RuntimeError):
            pass
