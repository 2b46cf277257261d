"""Reading tool calls back out of generated text, whole or while it streams."""
from __future__ import annotations

import json
import re
import uuid

from .tool_grammar import CALL_CLOSE, CALL_OPEN

_CALL = re.compile(re.escape(CALL_OPEN) + r"(.*?)" + re.escape(CALL_CLOSE), re.DOTALL)


def _openai_call(body: str, index: int) -> dict | None:
    try:
        call = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return None
    return {"index": index, "id": "call_" + uuid.uuid4().hex[:24], "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))}}


def parse_tool_calls(text: str) -> list[dict] | None:
    """The calls when the whole text is tool calls, else None (a plain answer)."""
    if not text.lstrip().startswith(CALL_OPEN):
        return None
    calls = [_openai_call(body, i) for i, body in enumerate(_CALL.findall(text))]
    if not calls or any(c is None for c in calls) or _CALL.sub("", text).strip():
        return None
    return calls


_HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*"([A-Za-z0-9_-]{1,64})"\s*,\s*"arguments"\s*:\s*')
_TAIL = "}" + CALL_CLOSE  # what ends a call: the object's brace, then the closing tag


class ToolCallStream:
    """Splits streamed text into content deltas and tool-call deltas, as OpenAI streams
    them: a call's id and name first, then its arguments piece by piece. Text is held back
    only while it could still be the start of a call, or the end of one."""

    def __init__(self):
        self.buffer = ""
        self.mode: str | None = None  # None: undecided, "text", "calls"
        self.num_calls = 0
        self.open_call = False  # inside a call's arguments

    def feed(self, text: str, final: bool) -> tuple[str, list[dict]]:
        """(content to emit, tool-call deltas to emit) for the next piece of text."""
        self.buffer += text
        if self.mode is None:
            stripped = self.buffer.lstrip()
            if stripped.startswith(CALL_OPEN):
                self.mode = "calls"
            elif not CALL_OPEN.startswith(stripped) or final:
                self.mode = "text"
            else:
                return "", []
        if self.mode == "text":
            out, self.buffer = self.buffer, ""
            return out, []
        deltas: dict[int, dict] = {}
        while self._step(deltas):
            pass
        leftover = self.buffer.strip() if final else ""
        return leftover, list(deltas.values())

    def _step(self, deltas: dict[int, dict]) -> bool:
        """Consume what can be consumed of the buffer; True when it should be called again."""
        if self.open_call:
            index = self.num_calls - 1
            end = self.buffer.find(_TAIL)
            cut = end if end >= 0 else max(0, len(self.buffer) - len(_TAIL))
            if cut:
                entry = deltas.setdefault(index, {"index": index, "function": {"arguments": ""}})
                entry["function"]["arguments"] += self.buffer[:cut]
            self.buffer = self.buffer[cut + (len(_TAIL) if end >= 0 else 0):]
            self.open_call = end < 0
            return end >= 0
        stripped = self.buffer.lstrip()
        if not stripped.startswith(CALL_OPEN):
            return False
        head = _HEAD.match(stripped, len(CALL_OPEN))
        if head is None:
            return False
        deltas[self.num_calls] = {"index": self.num_calls, "id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                                  "function": {"name": head.group(1), "arguments": ""}}
        self.num_calls += 1
        self.open_call = True
        self.buffer = stripped[head.end():]
        return True
