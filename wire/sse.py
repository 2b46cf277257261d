"""Server-sent events framing as the OpenAI streaming API uses it."""
from __future__ import annotations

import json

DONE = b"data: [DONE]\n\n"


def event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def named_event(name: str, obj: dict) -> bytes:
    """An SSE frame with an `event:` line (the Responses and Anthropic Messages streams use them)."""
    return f"event: {name}\n".encode() + event(obj)


def error_event(message: str, type: str = "server_error", code: str | None = None) -> bytes:
    return event({"error": {"message": message, "type": type, "param": None, "code": code}})


def iter_events(buffer: bytearray):
    """Pop complete `data:` payloads (bytes) from a growing buffer, leaving any partial tail."""
    while True:
        end = buffer.find(b"\n\n")
        if end < 0:
            return
        frame = bytes(buffer[:end])
        del buffer[: end + 2]
        data = [line[5:].lstrip() for line in frame.split(b"\n") if line.startswith(b"data:")]
        if data:
            yield b"\n".join(data)
