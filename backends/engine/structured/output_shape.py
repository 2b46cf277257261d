"""The shape of a constrained output, for finishing it early: one JSON value (response_format),
or tool calls `<tool_call>{json}</tool_call>` (backends/serving/tool_grammar.py), or, with
`tool_choice: auto`, whichever the first byte picks. `OutputReader` follows the bytes and says
the shortest text that completes what is written (json_shape.py does the JSON inside)."""
from __future__ import annotations

from dataclasses import dataclass

from .json_shape import JsonShape, Unclosable


@dataclass(frozen=True)
class OutputShape:
    answer: dict | None = None     # the answer's JSON schema, when the answer is JSON
    call: dict | None = None       # one call's JSON schema, when tool calls may be written
    calls_only: bool = False       # tool_choice required or a named function: no plain answer
    open: str = "<tool_call>"
    close: str = "</tool_call>"


class OutputReader:
    def __init__(self, shape: OutputShape):
        self.shape = shape
        self.mode = "calls" if shape.calls_only else ("answer" if shape.call is None else "undecided")
        self.json = JsonShape(shape.answer) if self.mode == "answer" else None
        self.literal = 0      # calls: bytes of the open (in "open") or close (in "close") tag matched
        self.part = "open"    # calls: open, json, close, between

    def copy(self) -> "OutputReader":
        twin = OutputReader.__new__(OutputReader)
        twin.shape, twin.mode, twin.literal, twin.part = self.shape, self.mode, self.literal, self.part
        twin.json = self.json.copy() if self.json is not None else None
        return twin

    def feed(self, data: bytes) -> None:
        for i, byte in enumerate(data):
            if self.mode == "undecided":
                if byte == ord("<"):
                    self.mode = "calls"
                elif self.shape.answer is not None:
                    self.mode, self.json = "answer", JsonShape(self.shape.answer)
                else:
                    self.mode = "text"
            if self.mode == "text":
                return
            if self.mode == "answer":
                self.json.feed(data[i:])
                return
            self._call_byte(byte)

    def _call_byte(self, byte: int) -> None:
        if self.part == "between":
            self.part, self.literal = "open", 0
        if self.part in ("open", "close"):
            tag = (self.shape.open if self.part == "open" else self.shape.close).encode()
            if tag[self.literal] != byte:
                raise Unclosable("not the tool-call tag")
            self.literal += 1
            if self.literal == len(tag):
                self.part, self.literal = ("json", 0) if self.part == "open" else ("between", 0)
                self.json = JsonShape(self.shape.call) if self.part == "json" else None
            return
        self.json.feed(bytes([byte]))
        if self.json.done:
            self.part = "close"

    def closing(self) -> bytes | None:
        """The shortest finishing bytes (b'' when complete), None when they cannot be told."""
        open_tag, close_tag = self.shape.open.encode(), self.shape.close.encode()
        if self.mode in ("text", "undecided"):
            return b"" if self.mode == "text" else self._first()
        if self.mode == "answer":
            return self.json.closing()
        if self.part == "between":
            return b""
        if self.part == "open":
            rest = JsonShape(self.shape.call).closing()
            return None if rest is None else open_tag[self.literal:] + rest + close_tag
        if self.part == "json":
            rest = self.json.closing()
            return None if rest is None else rest + close_tag
        return close_tag[self.literal:]

    def _first(self) -> bytes | None:
        """Nothing written yet: the shorter of an answer and one call."""
        options = []
        if self.shape.answer is not None:
            options.append(JsonShape(self.shape.answer).closing())
        else:
            options.append(b"")  # a plain-text answer may be anything, even empty
        if self.shape.call is not None:
            call = JsonShape(self.shape.call).closing()
            options.append(None if call is None else self.shape.open.encode() + call + self.shape.close.encode())
        known = [o for o in options if o is not None]
        return min(known, key=len) if known else None
