"""The grammar for a chat request's output: JSON (response_format) and/or tool calls.

Tool calls are written `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (the
Hermes/Qwen convention), whatever the prompt format. With `required` or a named
function the output must be such calls, their arguments constrained by the function's
JSON schema, so they always parse. With `auto` the output is either a plain answer (free
text, or the response_format's JSON) or calls: one grammar allows both.
"""
from __future__ import annotations

import json

from backends.engine.structured.output_shape import OutputShape
from backends.engine.structured.grammar import (JSON_OPTIONS, closed_objects, json_object_grammar, json_schema_grammar,
                                    lark_grammar)
from wire.requests import GenerationParams
from wire.structured import FunctionTool

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"


def _call_schema(tools: list[FunctionTool]) -> dict:
    options = [{"type": "object", "additionalProperties": False, "required": ["name", "arguments"],
                "properties": {"name": {"const": t.name}, "arguments": closed_objects(t.parameters)}} for t in tools]
    schema = options[0] if len(options) == 1 else {"anyOf": options}
    return {**schema, "x-guidance": JSON_OPTIONS}


def _answer_schema(params: GenerationParams) -> dict | None:
    fmt = params.response_format
    if fmt is None or fmt.type == "text":
        return None
    return {"type": "object"} if fmt.type == "json_object" else fmt.schema


def uses_tools(params: GenerationParams) -> bool:
    return bool(params.tools) and params.tool_choice.mode != "none"


def output_shape(params: GenerationParams) -> OutputShape | None:
    """The same output as output_grammar describes, as the engine's length guard reads it."""
    answer = _answer_schema(params)
    if not uses_tools(params):
        return None if answer is None else OutputShape(answer=closed_objects(answer))
    choice = params.tool_choice
    tools = [t for t in params.tools if choice.mode != "function" or t.name == choice.name]
    call = {k: v for k, v in _call_schema(tools).items() if k != "x-guidance"}
    return OutputShape(answer=None if answer is None else closed_objects(answer), call=call,
                       calls_only=choice.mode in ("required", "function"), open=CALL_OPEN, close=CALL_CLOSE)


def output_grammar(params: GenerationParams) -> str | None:
    """The llguidance grammar for this request's output, or None when it is unconstrained."""
    answer = _answer_schema(params)
    if not uses_tools(params):
        if answer is None:
            return None
        return json_object_grammar() if params.response_format.type == "json_object" else json_schema_grammar(answer)
    choice = params.tool_choice
    tools = [t for t in params.tools if choice.mode != "function" or t.name == choice.name]
    repeat = "+" if params.parallel_tool_calls and choice.mode != "function" else ""
    rules = [f"calls: call{repeat}",
             f"call: {json.dumps(CALL_OPEN)} call_json {json.dumps(CALL_CLOSE)}",
             f"call_json: %json {json.dumps(_call_schema(tools))}"]
    if choice.mode in ("required", "function"):
        start = "start: calls"
    elif answer is None:
        start = "start: calls | TEXT"
        rules.append(r"TEXT: /[^<][\s\S]*/")  # a plain answer never starts like a call
    else:
        start = "start: calls | answer"
        rules.append(f"answer: %json {json.dumps({**closed_objects(answer), 'x-guidance': JSON_OPTIONS})}")
    return lark_grammar("\n".join([start, *rules]))
