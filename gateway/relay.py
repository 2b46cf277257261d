"""Relaying an upstream answer to the client, reading its token usage, and saying what the
request came to: `relay` opens the upstream (upstream.py), copies its answer and returns the
typed `Outcome` that finish.py consumes.

Streams are forwarded event by event as they arrive (no buffering beyond one partial SSE
frame). The gateway always asks upstreams for a usage chunk and drops it when the client
did not ask for one. A broken upstream mid-stream ends the client's stream with an
OpenAI-style error event; a client that goes away closes the upstream request.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Callable

import aiohttp
from aiohttp import web

from wire.errors import OpenAIError
from wire.sse import DONE, error_event, iter_events
from webwire.tracing import traced

from .config import Config, Tier
from .context import RequestContext
from .metrics import METRICS
from .routing import Route
from .shape_check import shape_fault, structured_schema
from .upstream import PATHS, RETRYABLE, Attempts, Opened, open_upstream

MAX_PENDING_FRAME = 1 << 20  # one SSE frame larger than this means a broken upstream


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reported: bool = False  # False: counted by the gateway (e.g. a cut stream)
    first_token_at: float = 0.0


@dataclass(frozen=True)
class Discarded:
    """An answer a tier served that the client did not get (a later tier's replaced it)."""
    tier: Tier
    usage: Usage


@dataclass(frozen=True)
class Outcome:
    """What one request's attempt to answer came to."""
    kind: str              # chat, completion or embeddings
    stream: bool
    served: Tier           # the tier that answered (when none did: the last one tried)
    attempts: int          # workers tried (> 1: failed over)
    opened: Opened | None  # the upstream attempt that answered, None when none did
    usage: Usage           # as reported, or counted by the gateway for a stream without a report
    cut: bool              # a stream that ended before the upstream finished it (client gone, upstream cut)
    stream_error: bool     # a streamed answer carried or ended with an upstream error
    answer: web.StreamResponse | None = None  # what the client gets...
    error: BaseException | None = None        # ...or what it raised instead
    discarded: tuple["Discarded", ...] = ()   # answers served but replaced (escalation on shape): billed too

    def deliver(self) -> web.StreamResponse:
        if self.error is not None:
            raise self.error
        return self.answer


@traced("relay")
async def relay(request: web.Request, state, config: Config, ctx: RequestContext, route: Route, kind: str,
                body: dict, *, stream: bool, include_usage: bool, shaper=None,
                tap: Callable[[bytes], None] | None = None) -> Outcome:
    """Open an upstream and copy its answer to the client. It never raises: whatever went wrong
    (no worker, the client gone) travels in the Outcome, so finish() always gets one."""
    usage, attempts = Usage(), Attempts(route.tier)
    opened = streamer = answer = error = None
    discarded: tuple[Discarded, ...] = ()
    try:
        opened = await open_upstream(state, config, ctx, route, PATHS[kind], body, stream, attempts)
        if not stream and kind == "chat":
            opened, discarded = await _reask_if_misshapen(state, config, ctx, route, body, opened, attempts)
        if stream:
            streamer = StreamRelay(request, opened, ctx, usage, include_usage, route.estimated_prompt_tokens, shaper)
            streamer.tap = tap
            answer = await streamer.run()
        else:
            whole = relay_whole(opened, ctx, usage)
            answer = await shaper.whole(whole) if shaper is not None else whole
    except BaseException as exc:  # cancellation too: the handler re-raises it after finish()
        error = exc
    if streamer is not None and not usage.reported:  # client went away mid-stream: bill what was streamed
        usage.prompt_tokens, usage.completion_tokens = route.estimated_prompt_tokens, streamer.chunks
    return Outcome(kind, stream, opened.tier if opened is not None else attempts.tier, attempts.count, opened,
                   usage, cut=streamer is not None and not streamer.completed,
                   stream_error=streamer is not None and streamer.cut, answer=answer, error=error,
                   discarded=discarded)


async def _reask_if_misshapen(state, config: Config, ctx: RequestContext, route: Route, body: dict,
                              opened: Opened, attempts: Attempts) -> tuple[Opened, tuple["Discarded", ...]]:
    """A whole structured answer cut by max_tokens or failing its schema is asked once of the
    next tier up that the tenant may use and that can serve it; the first answer is billed and
    dropped, or kept if no worker up there answers."""
    schema = structured_schema(body)
    if schema is None or not route.decision.structured_escalation or opened.response.status != 200:
        return opened, ()
    why = shape_fault(schema, opened.body)
    usable = route.decision.usable_tiers  # never past the tenant's allowed tiers, nor to one that cannot
    higher = min((t for t in config.tiers if t.level > opened.tier.level and t.name in usable),
                 key=lambda t: t.level, default=None) if why else None
    if higher is None:
        return opened, ()
    first = Usage()
    relay_whole(opened, ctx, first)  # its usage, for the bill
    again_attempts = Attempts(higher)
    try:
        again = await open_upstream(state, config, ctx, replace(route, tier=higher), PATHS["chat"], body, False,
                                    again_attempts)
    except OpenAIError:
        return opened, ()
    finally:
        attempts.count += again_attempts.count
    METRICS.shape_escalations.labels(opened.tier.name, higher.name, why).inc()
    opened.backend.on_done()
    opened.response.release()
    return again, (Discarded(opened.tier, first),)


def _read_usage(obj: dict, usage: Usage) -> None:
    reported = obj.get("usage")
    if isinstance(reported, dict):
        usage.prompt_tokens = int(reported.get("prompt_tokens") or 0)
        usage.completion_tokens = int(reported.get("completion_tokens") or 0)
        usage.reported = True


def relay_whole(opened: Opened, ctx: RequestContext, usage: Usage) -> web.Response:
    response = opened.response
    body = opened.body
    if response.status == 200:
        try:
            _read_usage(json.loads(body), usage)
        except (ValueError, AttributeError):
            raise OpenAIError(502, "upstream answered with a body that is not JSON", code="bad_upstream") from None
        usage.first_token_at = time.perf_counter()
        return web.Response(body=body, status=200, content_type="application/json")
    # An upstream 4xx is the upstream's verdict on the request: pass its OpenAI error through.
    try:
        json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        raise OpenAIError(response.status, f"upstream rejected the request: {body[:200].decode(errors='replace')}",
                          code="upstream_error") from None
    return web.Response(body=body, status=response.status, content_type="application/json")


class StreamRelay:
    def __init__(self, request: web.Request, opened: Opened, ctx: RequestContext, usage: Usage,
                 client_wants_usage: bool, estimated_prompt_tokens: int, shaper=None):
        self.request, self.opened, self.ctx, self.usage = request, opened, ctx, usage
        self.shaper = shaper  # optional: turns chat chunks into another wire format's events
        self.client_wants_usage = client_wants_usage
        self.estimated_prompt_tokens = estimated_prompt_tokens
        self.chunks = 0
        self.cut = False
        self.completed = False
        self.tap = None  # optional callable seeing each upstream data payload (quality sampling)

    async def run(self) -> web.StreamResponse:
        upstream = self.opened.response
        if upstream.status != 200:  # a 4xx for a stream request: answer it like a whole one
            self.completed = True
            return relay_whole(self.opened, self.ctx, self.usage)
        headers = self.ctx.headers()
        headers["Cache-Control"] = "no-cache"
        client = web.StreamResponse(status=200, headers=headers)
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
        await client.write_eof()
        self.completed = True
        return client

    async def _forward(self, client: web.StreamResponse, buffer: bytearray) -> bool:
        out = []
        done = False
        for data in iter_events(buffer):
            if data == b"[DONE]":
                out.append(DONE if self.shaper is None else await self.shaper.finish())
                done = True
                break
            if self.tap is not None:
                self.tap(data)
            if self.shaper is not None:
                out.append(self._shape(json.loads(data)))
                continue
            if b'"usage"' in data or b'"error"' in data:
                obj = json.loads(data)
                if obj.get("error"):
                    self.cut = True
                if obj.get("usage"):
                    _read_usage(obj, self.usage)
                    if not obj.get("choices") and not self.client_wants_usage:
                        continue  # the usage chunk the gateway asked for, not the client
            if self.chunks == 0:
                self.usage.first_token_at = time.perf_counter()
            self.chunks += 1
            out.append(b"data: " + data + b"\n\n")
        if out:
            await client.write(b"".join(out))
        return done

    def _shape(self, obj: dict) -> bytes:
        if obj.get("error"):
            self.cut = True
        if obj.get("usage"):
            _read_usage(obj, self.usage)
        if self.chunks == 0:
            self.usage.first_token_at = time.perf_counter()
        self.chunks += 1
        return self.shaper.chunk(obj)

    async def _end_with_error(self, client: web.StreamResponse, message: str) -> None:
        self.cut = True
        METRICS.stream_cut.labels(self.ctx.tier, self.ctx.backend).inc()
        self.opened.response.close()
        if not self.usage.reported:  # bill what was streamed: content chunks ~ tokens
            self.usage.prompt_tokens = self.estimated_prompt_tokens
            self.usage.completion_tokens = self.chunks
        try:
            await client.write(error_event(message, code="upstream_error") + DONE if self.shaper is None
                               else self.shaper.error(message))
            await client.write_eof()
        except (ConnectionError, RuntimeError):
            pass
