"""Where a JSON answer stands, byte by byte, and the shortest text that would finish it.

`JsonShape` reads the output as the model writes it (compact JSON, as the grammar makes it)
and keeps a stack of open containers, strings, numbers and literals, each with its part of
the schema. `closing()` is the shortest text that ends every open thing and supplies the
required properties and items still missing, with the shortest value each schema allows
(schema_values.py); None where it cannot tell (a string under a `pattern` or `format`). The
grammar stays the judge: the caller checks the closing against the matcher before forcing it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from .schema_values import Schemas, Unclosable, dump, free_keys

_LITERALS = {ord("t"): "true", ord("f"): "false", ord("n"): "null"}
_NUMBER_BYTES = frozenset(b"0123456789+-.eE")


def _complete_utf8(pending: bytes) -> bytes:
    """Continuation bytes that finish a character cut mid-way (the smallest valid ones)."""
    if not pending:
        return b""
    lead = pending[0]
    size = 2 if lead >= 0xC0 and lead < 0xE0 else 3 if lead < 0xF0 else 4
    second = {0xE0: 0xA0, 0xF0: 0x90}.get(lead, 0x80)
    missing = size - len(pending)
    return bytes([second] if len(pending) == 1 else []) + bytes([0x80] * (missing - (len(pending) == 1)))


def _finish_number(text: str, schema: dict) -> str:
    """Digits that make the number written so far complete and within its bounds."""
    tail = "0" if text[-1] in "+-.eE" else ""
    low, high = schema.get("minimum", schema.get("exclusiveMinimum")), schema.get("maximum", schema.get("exclusiveMaximum"))
    for zeros in range(0, 20):
        value = float(text + tail + "0" * zeros)
        too_low = isinstance(low, (int, float)) and (value < low or (value == low and "exclusiveMinimum" in schema))
        too_high = isinstance(high, (int, float)) and (value > high or (value == high and "exclusiveMaximum" in schema))
        if too_high:
            break
        if not too_low:
            return tail + "0" * zeros
        if "e" in text.lower() or value < 0:
            break  # more digits make an exponent or a negative number larger, not its value closer
    raise Unclosable("no digits bring this number within its bounds")


def _escape_tail(frame: Frame) -> str:
    """What finishes an escape cut mid-way: a letter after a backslash, zeros inside \\u."""
    return "n" if frame.escape == 1 else "0" * (6 - frame.escape) if frame.escape >= 2 else ""


def _complete(frame: Frame, options: list[str], cost) -> tuple[str, str]:
    """The rest of the string written so far, as the cheapest option it can still become."""
    tail = _escape_tail(frame)
    options = [v for v in options if dump(v)[1:-1].startswith(frame.text)]
    if not options:
        raise Unclosable("no allowed string starts this way")
    best = min(options, key=cost)
    rest = (tail + '"') if dump(best)[1:-1] == frame.text + tail else dump(best)[1 + len(frame.text):]
    return rest, best


@dataclass
class Frame:
    kind: str                 # object, array, string, number, literal
    schema: dict
    state: str = "start"      # object: start, key, colon, value, next, comma; array: start, next, comma
    text: str = ""            # string: raw (escaped) bytes so far as text; number/literal: bytes so far
    escape: int = 0           # string: 0 none, 1 after a backslash, 2..5 inside \u with (n-2) hex digits
    is_key: bool = False
    seen: frozenset = field(default_factory=frozenset)  # object: keys written so far
    key: str = ""             # object: the key whose value comes next
    count: int = 0            # array: items written so far


class JsonShape:
    """The reader: feed() the output's bytes, closing() the shortest finish."""

    def __init__(self, schema: dict):
        self.schemas = Schemas(schema)
        self.root = self.schemas.resolve(schema)
        self.stack: list[Frame] = []
        self.started = False
        self.done = False
        self._pending = b""  # an incomplete UTF-8 character inside a string

    def copy(self) -> "JsonShape":
        twin = JsonShape.__new__(JsonShape)
        twin.schemas, twin.root, twin.started, twin.done = self.schemas, self.root, self.started, self.done
        twin.stack = [replace(f) for f in self.stack]
        twin._pending = self._pending
        return twin

    # -- reading -------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        for byte in data:
            self._byte(byte)

    def _byte(self, b: int) -> None:
        top = self.stack[-1] if self.stack else None
        if top is not None and top.kind == "string":
            self._string_byte(top, b)
        elif top is not None and top.kind == "number" and b in _NUMBER_BYTES:
            top.text += chr(b)
        elif top is not None and top.kind == "number":
            self._close_value()
            self._byte(b)
        elif top is not None and top.kind == "literal":
            top.text += chr(b)
            if len(top.text) == len(top.state):
                self._close_value()
        elif b in b" \t\r\n":
            return
        elif top is None:
            if self.done:
                raise Unclosable("bytes after the JSON value")
            self.started = True
            self._open_value(b, self.root)
        elif top.kind == "object":
            self._object_byte(top, b)
        else:
            self._array_byte(top, b)

    def _open_value(self, b: int, schema: dict) -> None:
        if b == ord("{"):
            self.stack.append(Frame("object", schema))
        elif b == ord("["):
            self.stack.append(Frame("array", schema))
        elif b == ord('"'):
            self.stack.append(Frame("string", schema))
        elif b in _NUMBER_BYTES:
            self.stack.append(Frame("number", schema, text=chr(b)))
        elif b in _LITERALS:
            self.stack.append(Frame("literal", schema, state=_LITERALS[b], text=chr(b)))
        else:
            raise Unclosable(f"unexpected byte {b!r}")

    def _string_byte(self, top: Frame, b: int) -> None:
        if top.escape == 1:
            top.escape = 2 if b == ord("u") else 0
        elif top.escape >= 2:
            top.escape = 0 if top.escape == 5 else top.escape + 1
        elif b == ord("\\"):
            top.escape = 1
        elif b == ord('"'):
            self._close_value()
            return
        self._pending += bytes([b])
        try:
            top.text += self._pending.decode()
            self._pending = b""
        except UnicodeDecodeError:
            if len(self._pending) >= 4:
                raise Unclosable("invalid UTF-8 in a string") from None

    def _object_byte(self, top: Frame, b: int) -> None:
        if top.state in ("start", "comma") and b == ord('"'):
            top.state = "key"
            self.stack.append(Frame("string", {}, is_key=True))
        elif top.state in ("start", "next") and b == ord("}"):
            self._close_value()
        elif top.state == "colon" and b == ord(":"):
            top.state = "value"
        elif top.state == "value":
            self._open_value(b, self._property(top, top.key))
        elif top.state == "next" and b == ord(","):
            top.state = "comma"
        else:
            raise Unclosable(f"unexpected byte {b!r} in an object")

    def _array_byte(self, top: Frame, b: int) -> None:
        if top.state in ("start", "next") and b == ord("]"):
            self._close_value()
        elif top.state == "next" and b == ord(","):
            top.state = "comma"
        elif top.state in ("start", "comma"):
            top.state = "item"
            self._open_value(b, self.schemas.item_schema(top.schema, top.count))
        else:
            raise Unclosable(f"unexpected byte {b!r} in an array")

    def _close_value(self) -> None:
        """The top frame is complete: hand it to its parent."""
        closed = self.stack.pop()
        if not self.stack:
            self.done = True
            return
        parent = self.stack[-1]
        if closed.is_key:
            parent.key, parent.state = json.loads(f'"{closed.text}"'), "colon"
        elif parent.kind == "object":
            parent.seen, parent.state = parent.seen | {parent.key}, "next"
        else:
            parent.count, parent.state = parent.count + 1, "next"

    def _property(self, obj: Frame, name: str) -> dict:
        props = obj.schema.get("properties") or {}
        if name in props:
            return self.schemas.resolve(props[name])
        extra = obj.schema.get("additionalProperties")
        return self.schemas.resolve(extra) if isinstance(extra, dict) else {}

    # -- finishing -----------------------------------------------------------------------
    def closing(self) -> bytes | None:
        """The shortest bytes that complete the value, b'' when it is complete, None when unknown."""
        try:
            if not self.started:
                return self.schemas.shortest(self.root).encode()
            parts, key = [], None  # key: the one an unfinished key string is completed to
            for i in range(len(self.stack) - 1, -1, -1):
                frame = self.stack[i]
                if frame.kind == "string" and frame.is_key:
                    text, key = self._finish_key(frame, self.stack[i - 1])
                else:
                    text = self._finish(i, key)
                parts.append(text)
            return _complete_utf8(self._pending) + "".join(parts).encode()
        except Unclosable:
            return None

    def _finish(self, index: int, key: str | None) -> str:
        """Text that ends frame `index`, given that everything above it has just ended (`key`:
        what an unfinished key string above it was completed to)."""
        frame = self.stack[index]
        above = index + 1 < len(self.stack)
        if frame.kind == "string":
            return self._finish_string(frame)
        if frame.kind == "number":
            return _finish_number(frame.text, frame.schema)
        if frame.kind == "literal":
            return frame.state[len(frame.text):]
        if frame.kind == "array":
            return self._finish_array(frame, above)
        return self._finish_object(frame, above, key)

    def _finish_string(self, frame: Frame) -> str:
        tail = _escape_tail(frame)
        s = frame.schema
        options = s["enum"] if isinstance(s.get("enum"), list) else [s["const"]] if "const" in s else None
        if options is None:
            if "pattern" in s or "format" in s:
                raise Unclosable("a string under a pattern or format")
            return tail + "a" * max(0, int(s.get("minLength") or 0) - len(frame.text)) + '"'
        return _complete(frame, [v for v in options if isinstance(v, str)], lambda v: len(dump(v)))[0]

    def _finish_key(self, frame: Frame, obj: Frame) -> tuple[str, str]:
        """The end of a key string and the key it makes: the one whose whole entry is shortest."""
        options = list(self._open_keys(obj))
        if free_keys(obj.schema):
            options.append(json.loads(f'"{frame.text}{_escape_tail(frame)}"'))  # any key: end this one here
        return _complete(frame, options, lambda k: len(dump(k)) + len(self._value_for_key(obj, k)))

    def _open_keys(self, obj: Frame) -> list[str]:
        """Keys the object may still take: its unwritten properties, and '' where any key goes."""
        keys = [k for k in obj.schema.get("properties") or {} if k not in obj.seen]
        if free_keys(obj.schema):
            keys.append(next(k for k in ("", *map(str, range(len(obj.seen) + 1))) if k not in obj.seen))
        return keys

    def _value_for_key(self, obj: Frame, key: str) -> str:
        return self.schemas.shortest(self._property(obj, key))

    def _missing(self, obj: Frame, also_seen: set) -> list[str]:
        return [k for k in obj.schema.get("required") or [] if k not in obj.seen and k not in also_seen]

    def _finish_object(self, obj: Frame, above: bool, key: str | None) -> str:
        out, written = "", set()
        state = obj.state
        if state in ("key", "colon"):  # a key just ended (in "key": its text came from above)
            key = key if state == "key" else obj.key
            out += ":" + self._value_for_key(obj, key)
            written.add(key)
        elif state == "value":
            if not above:
                out += self._value_for_key(obj, obj.key)
            written.add(obj.key)
        elif state == "comma":
            missing = self._missing(obj, written)
            key = missing[0] if missing else min(self._open_keys(obj) or [None], key=lambda k: len(
                dump(k) + self._value_for_key(obj, k)) if k is not None else 0)
            if key is None:
                raise Unclosable("a comma with no key left to write")
            out += f"{dump(key)}:{self._value_for_key(obj, key)}"
            written.add(key)
        first = state == "start"
        for key in self._missing(obj, written):
            out += ("" if first else ",") + f"{dump(key)}:{self._value_for_key(obj, key)}"
            first = False
        return out + "}"

    def _finish_array(self, arr: Frame, above: bool) -> str:
        count = arr.count
        out = ""
        if arr.state == "item":
            count += 1  # the item above has just ended
        elif arr.state == "comma":
            out += self.schemas.item(arr.schema, count)
            count += 1
        minimum = int(arr.schema.get("minItems") or 0)
        while count < minimum:
            out += ("," if count else "") + self.schemas.item(arr.schema, count)
            count += 1
        return out + "]"
