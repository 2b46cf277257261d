"""The shortest JSON text a schema accepts, and the schema of each part of a document: what the
length guard (json_shape.py) supplies for values, properties and items still to write.
`$ref`s resolve against the root's `$defs`/`definitions`; `allOf` parts are merged."""
from __future__ import annotations

import json
import math


class Unclosable(Exception):
    """No closing this reader can vouch for (the caller then leaves the sequence alone)."""


def dump(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Schemas:
    """Resolves `$ref`s against the root schema's `$defs`/`definitions` and finds shortest values."""

    def __init__(self, root: dict):
        self.root = root
        self._shortest: dict[int, tuple[object, str]] = {}  # id(schema) -> (schema, its shortest value)

    def resolve(self, schema) -> dict:
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 32:
            ref, seen = schema["$ref"], seen + 1
            node = self.root
            for part in ref.removeprefix("#").strip("/").split("/") if ref != "#" else []:
                node = node.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(node, dict) else {}
            schema = {**node, **{k: v for k, v in schema.items() if k != "$ref"}}
        if isinstance(schema, dict) and isinstance(schema.get("allOf"), list):
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                merged.update(self.resolve(part))
            schema = merged
        return schema if isinstance(schema, dict) else {}

    def shortest(self, schema, depth: int = 0) -> str:
        """The shortest JSON text the schema accepts (memoised: the closing asks for it every token)."""
        known = self._shortest.get(id(schema))
        if known is not None and known[0] is schema:
            return known[1]
        text = self._shortest_uncached(schema, depth)
        self._shortest[id(schema)] = (schema, text)
        return text

    def _shortest_uncached(self, schema, depth: int) -> str:
        s = self.resolve(schema)
        if depth > 32:
            raise Unclosable("schema recursion")
        if "const" in s:
            return dump(s["const"])
        if isinstance(s.get("enum"), list) and s["enum"]:
            return min((dump(v) for v in s["enum"]), key=len)
        options = s.get("anyOf") or s.get("oneOf")
        if isinstance(options, list) and options:
            return _shortest_of(lambda o: self.shortest(o, depth + 1), options)
        kind = s.get("type")
        if isinstance(kind, list):
            return _shortest_of(lambda k: self.shortest({**s, "type": k}, depth + 1), kind)
        if kind == "object" or (kind is None and ("properties" in s or "required" in s)):
            props = s.get("properties") or {}
            return "{" + ",".join(f"{dump(k)}:{self.shortest(props.get(k, {}), depth + 1)}"
                                  for k in s.get("required") or []) + "}"
        if kind == "array":
            return "[" + ",".join(self.item(s, i, depth) for i in range(int(s.get("minItems") or 0))) + "]"
        if kind == "string":
            if "pattern" in s or "format" in s:
                raise Unclosable("a string under a pattern or format")
            return '"' + "a" * int(s.get("minLength") or 0) + '"'
        if kind in ("integer", "number"):
            return _shortest_number(s)
        if kind == "boolean":
            return "true"
        if kind == "null":
            return "null"
        return "0"  # no type: any value; a digit is the shortest

    def item(self, array: dict, index: int, depth: int = 0) -> str:
        """The shortest value for item `index` of the array."""
        return self.shortest(_item(array, index), depth + 1)

    def item_schema(self, array: dict, index: int) -> dict:
        return self.resolve(_item(array, index))


def _item(array: dict, index: int):
    """Item `index`'s schema as written: its `prefixItems` entry, else `items`."""
    prefix = array.get("prefixItems")
    if isinstance(prefix, list) and index < len(prefix):
        return prefix[index]
    items = array.get("items")
    return items if isinstance(items, dict) else {}


def free_keys(schema: dict) -> bool:
    """Whether an object takes keys it does not list (JSON Schema's default)."""
    return schema.get("additionalProperties") is not False and not schema.get("patternProperties")


def _shortest_of(make, options) -> str:
    found = []
    for option in options:
        try:
            found.append(make(option))
        except Unclosable:
            continue
    if not found:
        raise Unclosable("no alternative closes")
    return min(found, key=len)


def _shortest_number(s: dict) -> str:
    """0, moved just inside whatever bounds exclude it."""
    def bound(name):
        value = s.get(name)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    low, high, above, below = bound("minimum"), bound("maximum"), bound("exclusiveMinimum"), bound("exclusiveMaximum")
    value = 0
    if low is not None and value < low:
        value = math.ceil(low)
    if above is not None and value <= above:
        value = math.floor(above) + 1
    if high is not None and value > high:
        value = math.floor(high)
    if below is not None and value >= below:
        value = math.ceil(below) - 1
    return str(value)
