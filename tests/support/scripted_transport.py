"""A transport (gateway/core/transport.py's `Transport`) that answers from a script, in this
process: tests of routing, failover, billing and the surfaces that only need a worker's answers,
without a server. `script(sent)` returns the `Reply` for each call (POST or GET: `sent.method`),
or raises what the connection would (a refused connection, a timeout)."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Reply:
    status: int = 200
    body: bytes | dict = b""
    chunks: list[bytes] | None = None  # a stream: its pieces as they arrive, after `body`
    headers: dict = field(default_factory=dict)
    hold: asyncio.Event | None = None  # the reply waits for this before it is sent
    stall: asyncio.Event | None = None  # a stream that, its pieces sent, sets this and sends nothing more


@dataclass(frozen=True)
class Sent:
    url: str
    body: bytes
    headers: dict
    method: str = "POST"

    @property
    def json(self) -> dict:
        return json.loads(self.body) if self.body else {}


class _Content:
    def __init__(self, reply: Reply):
        self.pieces = [reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()]
        self.pieces += reply.chunks or []
        self.stall = reply.stall

    async def read(self, n: int = -1) -> bytes:
        data = b"".join(self.pieces)
        self.pieces = []
        return data if n < 0 else data[:n]

    async def readany(self) -> bytes:
        if not self.pieces and self.stall is not None:
            self.stall.set()
            await asyncio.Event().wait()  # until the reader gives up (the client leaves)
        return self.pieces.pop(0) if self.pieces else b""


class ScriptedResponse:
    def __init__(self, reply: Reply):
        self.status, self.headers, self.content = reply.status, reply.headers, _Content(reply)
        self.closed = self.released = False

    async def read(self) -> bytes:
        return await self.content.read()

    def close(self) -> None:
        self.closed = True

    def release(self) -> None:
        self.released = True


class ScriptedTransport:
    def __init__(self, script: Callable[[Sent], Reply]):
        self.script = script
        self.sent: list[Sent] = []
        self.responses: list[ScriptedResponse] = []

    async def post(self, url: str, *, data: bytes, headers, timeout=None) -> ScriptedResponse:
        return await self._answer(Sent(str(url), data, dict(headers)))

    async def get(self, url: str, *, headers, timeout=None) -> ScriptedResponse:
        return await self._answer(Sent(str(url), b"", dict(headers), "GET"))

    def posts_to(self, base: str) -> int:
        """How many POSTs the gateway sent the worker at `base`."""
        return sum(sent.method == "POST" and sent.url.startswith(base) for sent in self.sent)

    async def _answer(self, sent: Sent) -> ScriptedResponse:
        self.sent.append(sent)
        reply = self.script(sent)
        if reply.hold is not None:
            await reply.hold.wait()
        response = ScriptedResponse(reply)
        self.responses.append(response)
        return response


def chat_answer(text: str = "ok", prompt_tokens: int = 5, completion_tokens: int = 2, usage: bool = True) -> dict:
    answer = {"id": "chatcmpl-s", "object": "chat.completion", "model": "m",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
    if usage:
        answer["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                           "total_tokens": prompt_tokens + completion_tokens}
    return answer


def sse(*payloads: dict | str) -> list[bytes]:
    """Stream frames: each payload as one `data:` event ("[DONE]" as it is)."""
    return [b"data: " + (p.encode() if isinstance(p, str) else json.dumps(p).encode()) + b"\n\n" for p in payloads]


def embeddings_answer(count: int, tokens: int = 3) -> dict:
    return {"object": "list", "model": "m", "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            "data": [{"object": "embedding", "index": i, "embedding": [0.125] * 8} for i in range(count)]}


def worker(sent: Sent) -> Reply:
    """A healthy worker of ours on every route a surface test needs: health, a card that states
    nothing (the config's capabilities stand), chat and text completions (whole or streamed, with
    usage) and embeddings. Tests that need other answers write a script of their own."""
    path = sent.url.split("://", 1)[-1].split("/", 1)[-1].split("?")[0]
    if sent.method == "GET":
        return Reply(body={"status": "ok"} if path == "health" else {"object": "list", "data": []})
    body = sent.json
    if path == "v1/embeddings":
        inputs = body.get("input")
        return Reply(body=embeddings_answer(1 if isinstance(inputs, str) else len(inputs)))
    answer = chat_answer("ok")
    if path == "v1/completions":
        answer = {**answer, "object": "text_completion",
                  "choices": [{"index": 0, "text": "ok", "finish_reason": "stop"}]}
    if not body.get("stream"):
        return Reply(body=answer)
    kind = "chat.completion.chunk" if path == "v1/chat/completions" else "text_completion"
    delta = {"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"} \
        if kind == "chat.completion.chunk" else {"index": 0, "text": "ok", "finish_reason": "stop"}
    envelope = {"id": "s", "object": kind, "created": 0, "model": "m"}
    return Reply(headers={"Content-Type": "text/event-stream"}, chunks=sse(
        {**envelope, "choices": [delta]}, {**envelope, "choices": [], "usage": answer["usage"]}, "[DONE]"))
