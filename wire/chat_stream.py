"""What the Responses and Anthropic translations share: reading a chat chunk stream, and
walking a request's tool list."""
from __future__ import annotations

from .errors import bad_request


class ChatChunkTranslator:
    """Feed chat-completion chunks in order; subclasses turn text and tool-call deltas into events."""

    def __init__(self):
        self.started = False
        self.usage: dict | None = None
        self.finish_reason: str | None = None

    def start(self) -> list[tuple[str, dict]]:
        raise NotImplementedError

    def on_text(self, text: str) -> list[tuple[str, dict]]:
        raise NotImplementedError

    def on_call(self, call: dict) -> list[tuple[str, dict]]:
        raise NotImplementedError

    def opening(self) -> list[tuple[str, dict]]:
        return [] if self.started else self.start()

    def feed(self, chunk: dict) -> list[tuple[str, dict]]:
        events = self.opening()
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                events += self.on_text(delta["content"])
            for call in delta.get("tool_calls") or []:
                events += self.on_call(call)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return events


def tool_list(tools) -> list[tuple[int, dict, object]]:
    """(index, tool, its `type`) for each entry of a `tools` list, or a 400 naming `tools`."""
    if not isinstance(tools, list):
        raise bad_request("'tools' must be a list", param="tools")
    return [(i, tool, tool.get("type") if isinstance(tool, dict) else None) for i, tool in enumerate(tools)]


def check_top_level(body: dict, fields: set[str], path: str) -> None:
    """Unknown fields are a 400 naming them (never dropped silently); `model` is required."""
    unknown = sorted(set(body) - fields)
    if unknown:
        raise bad_request(f"'{unknown[0]}' is not supported on {path}", param=unknown[0],
                          code="unsupported_parameter")
    if not isinstance(body.get("model"), str) or not body["model"].strip():
        raise bad_request("'model' is required and must be a non-empty string", param="model")
