"""`response_format`, `tools` and `tool_choice`: validated into typed objects.

Schemas are checked here with jsonschema's meta-schema (so the gateway rejects a broken
schema before routing); whether the grammar compiler accepts it is the worker's call.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from .errors import bad_request
from .schema_limits import check_schema_limits

MAX_TOOLS = 128
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass
class ResponseFormat:
    type: str  # "text" | "json_object" | "json_schema"
    schema: dict | None = None
    name: str | None = None
    strict: bool = False


@dataclass
class FunctionTool:
    name: str
    description: str = ""
    parameters: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool = False

    def as_openai(self) -> dict:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


@dataclass
class ToolChoice:
    mode: str  # "auto" | "none" | "required" | "function"
    name: str | None = None  # the function's name when mode == "function"


def _schema(value, param: str) -> dict:
    if not isinstance(value, dict):
        raise bad_request(f"'{param}' must be a JSON Schema object", param=param)
    check_schema_limits(value, param)
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as exc:
        raise bad_request(f"'{param}' is not a valid JSON Schema: {exc.message}", param=param) from None
    return value


def _strict(value, param: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_request(f"'{param}' must be a boolean", param=param)
    return value


def parse_response_format(body: dict) -> ResponseFormat | None:
    value = body.get("response_format")
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") not in ("text", "json_object", "json_schema"):
        raise bad_request("'response_format.type' must be 'text', 'json_object' or 'json_schema'",
                          param="response_format")
    if value["type"] != "json_schema":
        return ResponseFormat(value["type"])
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        raise bad_request("'response_format.json_schema' must be an object", param="response_format.json_schema")
    name = spec.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise bad_request("'response_format.json_schema.name' must match [A-Za-z0-9_-]{1,64}",
                          param="response_format.json_schema.name")
    schema = _schema(spec.get("schema", {}), "response_format.json_schema.schema")
    return ResponseFormat("json_schema", schema, name, _strict(spec.get("strict"), "response_format.json_schema.strict"))


def parse_tools(body: dict) -> list[FunctionTool]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS:
        raise bad_request(f"'tools' must be a list of at most {MAX_TOOLS} tools", param="tools")
    parsed, names = [], set()
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise bad_request(f"{where} must be {{\"type\": \"function\", \"function\": {{...}}}}", param=where)
        fn = tool["function"]
        name = fn.get("name")
        if not isinstance(name, str) or not _NAME.match(name) or name in names:
            raise bad_request(f"{where}.function.name must be a unique name matching [A-Za-z0-9_-]{{1,64}}",
                              param=f"{where}.function.name")
        description = fn.get("description") or ""
        if not isinstance(description, str):
            raise bad_request(f"{where}.function.description must be a string", param=f"{where}.function.description")
        parameters = fn.get("parameters")
        parameters = {"type": "object", "properties": {}} if parameters is None else \
            _schema(parameters, f"{where}.function.parameters")
        names.add(name)
        parsed.append(FunctionTool(name, description, parameters, _strict(fn.get("strict"), f"{where}.function.strict")))
    return parsed


def parse_tool_choice(body: dict, tools: list[FunctionTool]) -> ToolChoice:
    value = body.get("tool_choice")
    if value is None:
        return ToolChoice("auto" if tools else "none")
    if value in ("auto", "none", "required"):
        if value != "none" and not tools:
            raise bad_request(f"'tool_choice' = {value!r} needs 'tools'", param="tool_choice")
        return ToolChoice(value)
    if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("function"), dict):
        name = value["function"].get("name")
        if not isinstance(name, str) or name not in {t.name for t in tools}:
            raise bad_request(f"'tool_choice' names function {name!r}, which is not in 'tools'", param="tool_choice")
        return ToolChoice("function", name)
    raise bad_request("'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", "
                      "\"function\": {\"name\": ...}}", param="tool_choice")


def parse_parallel_tool_calls(body: dict) -> bool:
    value = body.get("parallel_tool_calls")
    if value is None:
        return True
    if not isinstance(value, bool):
        raise bad_request("'parallel_tool_calls' must be a boolean", param="parallel_tool_calls")
    return value
