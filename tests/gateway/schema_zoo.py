"""Twenty small JSON schemas for the validity run: every JSON type, enums, arrays, nesting,
optional and nullable fields; strings and arrays bounded so a short max_tokens suffices."""
from __future__ import annotations

WORD = {"type": "string", "maxLength": 12}
FIELDS = {
    "name": WORD,
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "score": {"type": "number", "minimum": 0, "maximum": 10, "multipleOf": 0.25},  # unbounded digits never end
    "active": {"type": "boolean"},
    "colour": {"enum": ["red", "green", "blue"]},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    "nickname": {"anyOf": [WORD, {"type": "null"}]},
    "point": {"type": "object", "additionalProperties": False, "required": ["x", "y"],
              "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9},
                             "y": {"type": "integer", "minimum": -9, "maximum": 9}}},
    "size": {"enum": ["S", "M", "L"]},
    "count": {"type": "integer", "minimum": 1, "maximum": 5},
}
_ORDER = list(FIELDS)


def schemas(count: int = 20) -> list[dict]:
    out = []
    for i in range(count):
        picked = [_ORDER[(i + j * 3) % len(_ORDER)] for j in range(1 + i % 4)]
        picked = list(dict.fromkeys(picked))
        required = picked if i % 2 == 0 else picked[:1]  # odd schemas have optional fields
        schema = {"type": "object", "additionalProperties": False, "required": required,
                  "properties": {name: FIELDS[name] for name in picked}}
        if i % 5 == 4:  # some wrap the record in an array of records
            schema = {"type": "object", "additionalProperties": False, "required": ["items"],
                      "properties": {"items": {"type": "array", "minItems": 1, "maxItems": 2, "items": schema}}}
        out.append(schema)
    return out
