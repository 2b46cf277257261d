"""One cached answer: how it is written to Redis, recorded as it passes (a whole body, or a
stream's data payloads), and replayed to a client as it was first sent, whole or streamed, with
a fresh id and timestamp (a replayed id would let two requests share one)."""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from aiohttp import web

from wire.sse import DONE, event

FORMAT = 1


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str               # chat or completion
    stream: bool
    tier: str
    prompt_tokens: int
    completion_tokens: int
    stored_ms: int
    payloads: tuple[bytes, ...]  # a whole answer's body, or a stream's data payloads in order ([DONE] not kept)

    def encode(self) -> bytes:
        head = json.dumps({"f": FORMAT, "kind": self.kind, "stream": self.stream, "tier": self.tier,
                           "p": self.prompt_tokens, "c": self.completion_tokens, "at": self.stored_ms},
                          separators=(",", ":")).encode()
        return b"\n".join((head, *self.payloads))

    @classmethod
    def decode(cls, raw: bytes) -> "Entry | None":
        """The entry, or None for one written in another format (never served)."""
        head, *payloads = raw.split(b"\n")
        meta = json.loads(head)
        if meta.get("f") != FORMAT:
            return None
        return cls(meta["kind"], meta["stream"], meta["tier"], meta["p"], meta["c"], meta["at"], tuple(payloads))

    def age_s(self) -> float:
        return max(0.0, time.time() - self.stored_ms / 1000)


def one_line(payload: bytes) -> bytes:
    """A JSON payload on one line (an entry separates payloads by newlines)."""
    return payload if b"\n" not in payload else json.dumps(json.loads(payload), separators=(",", ":"),
                                                               ensure_ascii=False).encode()


class Recorder:
    """The data payloads of a stream as they pass (the relay's tap), up to `limit` bytes; past it
    the answer is not kept."""

    def __init__(self, limit: int):
        self.limit, self.size, self.payloads, self.overflow = limit, 0, [], False

    def __call__(self, payload: bytes) -> None:
        if self.overflow:
            return
        self.size += len(payload) + 1
        if self.size > self.limit:
            self.overflow, self.payloads = True, []
            return
        self.payloads.append(payload)


def _fresh(obj: dict, answer_id: str, created: int) -> dict:
    if isinstance(obj, dict):
        obj["id"], obj["created"] = answer_id, created
    return obj


def _new_id(kind: str) -> str:
    return ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex


def _usage_only(obj: dict) -> bool:
    return bool(obj.get("usage")) and not obj.get("choices")


async def replay(entry: Entry, delivery, include_usage: bool, headers: dict[str, str]) -> web.StreamResponse:
    """The cached answer as the client would have got it from a worker: one fresh id for the
    whole answer, this moment as its creation time, the same content and usage."""
    answer_id, created = _new_id(entry.kind), int(time.time())
    shaper = delivery.shaper
    if not entry.stream:
        body = json.dumps(_fresh(json.loads(entry.payloads[0]), answer_id, created), separators=(",", ":"),
                          ensure_ascii=False).encode()
        whole = web.Response(body=body, status=200, content_type="application/json")
        return await shaper.whole(whole) if shaper is not None else whole
    client = web.StreamResponse(status=200, headers={**headers, "Cache-Control": "no-cache"})
    client.content_type = "text/event-stream"
    await client.prepare(delivery.to)
    out = []
    for payload in entry.payloads:
        obj = _fresh(json.loads(payload), answer_id, created)
        if shaper is not None:
            out.append(shaper.chunk(obj))
        elif include_usage or not _usage_only(obj):
            out.append(event(obj))
    out.append(DONE if shaper is None else await shaper.end())
    await client.write(b"".join(out))
    await client.write_eof()
    return client
