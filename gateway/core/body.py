"""A request body read within the configured limit, counted as it arrives: aiohttp inflates a
gzip, deflate or br body a bounded piece at a time into `request.content`, so reading stops
at limit + 1 bytes however small the compressed body was. Callers authenticate first
(`read_authenticated`: the cheapest refusal first, and nothing read for a caller without a key)."""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any, Callable

from aiohttp import web

from wire.errors import OpenAIError, parse_json_object

from .services import SERVICES

PARSE_INLINE_BYTES = 1 << 20  # larger bodies are parsed on a thread, so the event loop keeps serving
# aiohttp inflates as much as the reader asks for at once (and buffers twice that): ask in pieces.
READ_PIECE = 1 << 16


def too_large(limit: int) -> OpenAIError:
    return OpenAIError(413, f"request body is larger than {limit} bytes (limits.max_body_bytes)",
                       code="request_too_large")


def refuse_declared_oversize(request: web.Request, limit: int) -> None:
    """A 413 when the Content-Length alone (compressed, if it is) is over the limit: nothing read."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large(limit)


async def read_bytes(request: web.Request, limit: int) -> bytes:
    """The body, or a 413 as soon as more than `limit` bytes (decompressed) have arrived, or a
    408 when it has not all arrived within limits.body_read_timeout_s."""
    refuse_declared_oversize(request, limit)
    if request.content.is_eof():  # all of it arrived with the headers: no read can wait, no deadline to keep
        return await _read_within(request.content, limit)
    async with body_deadline(request):
        return await _read_within(request.content, limit)


async def _read_within(content, limit: int) -> bytes:
    data = bytearray()
    while chunk := await content.read(min(READ_PIECE, limit + 1 - len(data))):
        data += chunk
        if len(data) > limit:
            raise too_large(limit)
    return bytes(data)


@asynccontextmanager
async def body_deadline(request: web.Request):
    """The body (or multipart form) read within it has limits.body_read_timeout_s to arrive: a
    client sending it a byte at a time holds no connection longer than that."""
    timeout_s = request[SERVICES].config.limits.body_read_timeout_s
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except TimeoutError:
        raise OpenAIError(408, f"the request body did not arrive within {timeout_s:g} s "
                               "(limits.body_read_timeout_s)", code="request_timeout",
                          headers={"Connection": "close"}) from None


async def read_body(request: web.Request, limit: int) -> dict:
    """The body as a JSON object within `limit` bytes, or a 413 / 400 that says what is wrong."""
    raw = await read_bytes(request, limit)
    if len(raw) > PARSE_INLINE_BYTES:
        return await asyncio.to_thread(parse_json_object, raw)
    return parse_json_object(raw)


async def read_authenticated(request: web.Request, limit: int, authenticate: Callable[[], Any]) -> tuple[Any, dict]:
    """(tenant, body): a declared size over the limit (413), then the key from the headers (401),
    and only then the body."""
    refuse_declared_oversize(request, limit)
    tenant = authenticate()
    return tenant, await read_body(request, limit)
