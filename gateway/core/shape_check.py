"""Whether a whole structured answer has the shape its request asked for: every choice ended
on its own (not cut by max_tokens) and its content parses and validates against the
response_format's schema. The gateway asks the next tier up once when it does not."""
from __future__ import annotations

import json
from typing import Mapping

from wire.schema_regex import RE2Validator


def structured_schema(body: Mapping) -> dict | None:
    """The schema a chat request's answer must meet ({} for json_object), None when unstructured."""
    fmt = body.get("response_format")
    if not isinstance(fmt, Mapping) or fmt.get("type") not in ("json_object", "json_schema"):
        return None
    if fmt["type"] == "json_object":
        return {"type": "object"}
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    return schema if isinstance(schema, dict) else {}


def shape_fault(schema: dict, answer: bytes) -> str | None:
    """'cut' (a choice ended by max_tokens), 'invalid' (content that does not parse or validate),
    or None when every choice has the asked shape."""
    try:
        choices = json.loads(answer)["choices"]
    except (ValueError, KeyError, TypeError):
        return "invalid"
    validator = RE2Validator(schema)  # patterns in RE2: linear in the answer's length
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict) or choice.get("finish_reason") == "length":
            return "cut"
        message = choice.get("message") or {}
        if message.get("tool_calls"):
            continue  # the model called a tool instead of answering: its arguments are the grammar's
        try:
            value = json.loads(message.get("content") or "")
        except ValueError:
            return "invalid"
        if not validator.is_valid(value):
            return "invalid"
    return None
