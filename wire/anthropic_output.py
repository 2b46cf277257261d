"""Internal chat completion (whole, or its chunk stream) -> Anthropic Messages objects and events,
and Anthropic-shaped error bodies. Pure: no I/O.

Stream order: message_start, then per content block content_block_start,
content_block_delta (text_delta | input_json_delta)..., content_block_stop, then
message_delta (stop_reason, usage) and message_stop.
"""
from __future__ import annotations

import json
import uuid

from .chat_stream import ChatChunkTranslator

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use"}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error",
               529: "overloaded_error"}


def error_body(status: int, message: str) -> dict:
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _input(arguments: str) -> dict:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"_raw_arguments": arguments}  # the model wrote invalid JSON: keep it visible, not dropped
    return value if isinstance(value, dict) else {"value": value}


def _usage(usage: dict | None) -> dict:
    usage = usage or {}
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return {"input_tokens": int(usage.get("prompt_tokens") or 0), "output_tokens": int(usage.get("completion_tokens") or 0),
            "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}


def completion_to_message(completion: dict, model: str) -> dict:
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    content = [{"type": "text", "text": message["content"]}] if message.get("content") else []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        content.append({"type": "tool_use", "id": call.get("id") or f"toolu_{uuid.uuid4().hex}",
                        "name": fn.get("name", ""), "input": _input(fn.get("arguments"))})
    return {"id": f"msg_{uuid.uuid4().hex}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": STOP_REASONS.get(choice.get("finish_reason"), "end_turn"),
            "stop_sequence": None, "usage": _usage(completion.get("usage"))}


class MessagesStream(ChatChunkTranslator):
    """Feed chat chunks in order; get (event name, payload) pairs out."""

    def __init__(self, model: str):
        super().__init__()
        self.model = model
        self.message_id = f"msg_{uuid.uuid4().hex}"
        self.block: tuple[str, int] | None = None  # ("text", -1) or ("tool", chat tool-call index)
        self.index = -1  # Anthropic content block index

    def start(self) -> list[tuple[str, dict]]:
        self.started = True
        return [("message_start", {"type": "message_start", "message": {
            "id": self.message_id, "type": "message", "role": "assistant", "model": self.model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": _usage(None)}})]

    def _open(self, key: tuple[str, int], block: dict) -> list[tuple[str, dict]]:
        events = self._close()
        self.index += 1
        self.block = key
        return events + [("content_block_start", {"type": "content_block_start", "index": self.index,
                                                  "content_block": block})]

    def _close(self) -> list[tuple[str, dict]]:
        if self.block is None:
            return []
        self.block = None
        return [("content_block_stop", {"type": "content_block_stop", "index": self.index})]

    def _delta(self, delta: dict) -> tuple[str, dict]:
        return "content_block_delta", {"type": "content_block_delta", "index": self.index, "delta": delta}

    def on_text(self, text: str) -> list[tuple[str, dict]]:
        events = [] if self.block == ("text", -1) else self._open(("text", -1), {"type": "text", "text": ""})
        return events + [self._delta({"type": "text_delta", "text": text})]

    def on_call(self, call: dict) -> list[tuple[str, dict]]:
        key, fn, events = ("tool", call.get("index", 0)), call.get("function") or {}, []
        if self.block != key:
            events += self._open(key, {"type": "tool_use", "id": call.get("id") or f"toolu_{uuid.uuid4().hex}",
                                       "name": fn.get("name", ""), "input": {}})
        if fn.get("arguments"):
            events.append(self._delta({"type": "input_json_delta", "partial_json": fn["arguments"]}))
        return events

    def end(self) -> list[tuple[str, dict]]:
        events = self.opening() + self._close()
        return events + [
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": STOP_REASONS.get(self.finish_reason, "end_turn"),
                                         "stop_sequence": None},
                               "usage": _usage(self.usage)}),
            ("message_stop", {"type": "message_stop"})]

    @staticmethod
    def failed(message: str) -> tuple[str, dict]:
        return "error", error_body(502, message)
