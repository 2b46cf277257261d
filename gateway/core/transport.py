"""How the gateway reaches a worker: one seam for every outbound call, like httpx's transports.
In a process it is the aiohttp session's own `post` and `get` (`http_transport`: the request
path's POSTs under the configured timeouts; health checks, capability cards and the console's
metrics as GETs with their own); tests hand the gateway a scripted one instead
(tests/support/scripted_transport.py), so routing, failover, billing and the surfaces that only
need a worker's answers run in process."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Awaitable, Mapping, Protocol

import aiohttp
from yarl import URL


class Body(Protocol):
    """The answer's body as it arrives: at most `n` bytes, or whatever is there now."""

    async def read(self, n: int = -1) -> bytes: ...

    async def readany(self) -> bytes: ...


class UpstreamResponse(Protocol):
    """What the request path reads of an answer (aiohttp.ClientResponse has it all)."""
    status: int
    headers: Mapping[str, str]
    content: Body

    async def read(self) -> bytes: ...

    def close(self) -> None: ...  # drops the connection: tells a worker to stop generating

    def release(self) -> None: ...  # the connection back to the pool, the answer read to its end


class Post(Protocol):
    """POST `data` to `url`; a call may name its own timeout instead of the configured one."""

    def __call__(self, url: str | URL, *, data: bytes, headers: Mapping[str, str],
                 timeout: aiohttp.ClientTimeout = ...) -> Awaitable[UpstreamResponse]: ...


class Get(Protocol):
    """GET `url` within `timeout`; the caller reads the answer and then releases it."""

    def __call__(self, url: str | URL, *, headers: Mapping[str, str],
                 timeout: aiohttp.ClientTimeout) -> Awaitable[UpstreamResponse]: ...


@dataclass(frozen=True, slots=True)
class Transport:
    post: Post  # the request path's calls (chat, completions, embeddings, abort)
    get: Get  # what the gateway reads of a worker: health, its card, its metrics


async def get_small(transport: Transport, url: str, headers: Mapping[str, str], timeout_s: float,
                    limit: int) -> tuple[int, bytes | None]:
    """GET an answer that must be small: its status, and its body when the status is 200 and the
    body is at most `limit` bytes (None past that: a worker's answer never fills our memory)."""
    response = await transport.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s))
    try:
        if response.status != 200:
            return response.status, None
        raw = await response.content.read(limit + 1)
    finally:
        response.release()
    return 200, raw if len(raw) <= limit else None


def http_transport(session: aiohttp.ClientSession | None, connect_s: float, read_s: float) -> Transport:
    return Transport(http_post(session, connect_s, read_s), session.get if session is not None else _no_session)


def http_post(session: aiohttp.ClientSession | None, connect_s: float, read_s: float) -> Post:
    """The session's post under the configured timeouts: no total, so a long stream is fine as
    long as bytes keep arriving. Bound directly, so no code of ours runs between a request and
    aiohttp."""
    timeout = aiohttp.ClientTimeout(total=None, connect=connect_s, sock_read=read_s)
    return partial(session.post if session is not None else _no_session, timeout=timeout)


async def _no_session(url: str | URL, **_) -> UpstreamResponse:
    raise RuntimeError(f"a call to {url} before the gateway started: there is no HTTP session yet")
