"""Chat messages, normalised: text content, plus the tool-calling fields a chat template needs.

Assistant messages keep their `tool_calls` and tool results keep their `tool_call_id`, so
a multi-turn tool conversation reaches the worker's chat template intact.
"""
from __future__ import annotations

import json

from .errors import bad_request

ROLES = {"system", "developer", "user", "assistant", "tool"}


def _text(content, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad_request(f"{where}.content parts must be text parts", param=f"{where}.content")
            parts.append(part["text"])
        return "".join(parts)
    if content is None:
        return ""
    raise bad_request(f"{where}.content must be a string or a list of text parts", param=f"{where}.content")


def _tool_calls(calls, where: str) -> list[dict]:
    param = f"{where}.tool_calls"
    if not isinstance(calls, list) or not calls:
        raise bad_request(f"{param} must be a non-empty list", param=param)
    out = []
    for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or call.get("type", "function") != "function" \
                or not isinstance(fn.get("name"), str) or not isinstance(fn.get("arguments"), str):
            raise bad_request(f"{param}[{j}] must be a function call with string 'name' and 'arguments'",
                              param=f"{param}[{j}]")
        try:
            arguments = json.loads(fn["arguments"])
        except json.JSONDecodeError:
            raise bad_request(f"{param}[{j}].function.arguments must be JSON", param=f"{param}[{j}]") from None
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise bad_request(f"{param}[{j}].id must be a string", param=f"{param}[{j}].id")
        out.append({"id": call_id or f"call_{j}", "type": "function",
                    "function": {"name": fn["name"], "arguments": arguments}})
    return out


def normalise_messages(messages: list) -> list[dict]:
    normalised = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad_request(f"{where} must be an object", param=where)
        role = message.get("role")
        if role not in ROLES:
            raise bad_request(f"{where}.role must be one of {sorted(ROLES)}", param=f"{where}.role")
        out = {"role": "system" if role == "developer" else role, "content": _text(message.get("content"), where)}
        if role == "assistant" and message.get("tool_calls") is not None:
            out["tool_calls"] = _tool_calls(message["tool_calls"], where)
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                raise bad_request(f"{where}.tool_call_id is required on tool messages", param=f"{where}.tool_call_id")
            out["tool_call_id"] = call_id
        name = message.get("name")
        if name is not None:
            if not isinstance(name, str):
                raise bad_request(f"{where}.name must be a string", param=f"{where}.name")
            out["name"] = name
        normalised.append(out)
    return normalised
