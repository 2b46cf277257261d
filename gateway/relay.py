"""Relaying an opened upstream answer to the client, and reading its token usage.

Streams are forwarded event by event as they arrive (no buffering beyond one partial SSE
frame). The gateway always asks upstreams for a usage chunk and drops it when the client
did not ask for one. A broken upstream mid-stream ends the client's stream with an
OpenAI-style error event; a client that goes away closes the upstream request.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from wire.errors import OpenAIError
from wire.sse import DONE, error_event, iter_events

from .context import RequestContext
from .metrics import METRICS
from .upstream import RETRYABLE, Opened

MAX_PENDING_FRAME = 1 << 20  # one SSE frame larger than this means a broken upstream


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reported: bool = False  # False: counted by the gateway (e.g. a cut stream)
    first_token_at: float = 0.0


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
