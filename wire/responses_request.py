"""OpenAI Responses API request -> internal chat-completions request body (a pure function).

Supported: `input` (a string, or message / function_call / function_call_output items),
`instructions`, function `tools`, `tool_choice`, `text.format` (text, json_object,
json_schema), `max_output_tokens`, `temperature`, `top_p`, `stream`, `store`,
`previous_response_id`. Anything else, any other item type and built-in tools (web search,
file search, computer use ...) are a 400 that names them: nothing is dropped silently.
"""
from __future__ import annotations

from dataclasses import dataclass

from .chat_stream import check_top_level, tool_list
from .errors import bad_request

FIELDS = {"model", "input", "instructions", "tools", "tool_choice", "text", "max_output_tokens", "temperature",
          "top_p", "stream", "store", "previous_response_id", "metadata", "user", "parallel_tool_calls",
          "cascade"}  # the gateway's own: its cascade on or off (docs/routing.md)
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
TEXT_PARTS = {"input_text", "output_text", "text"}
MAX_RESPONSE_ID = 128  # ids we give are resp_ + 32 hex; a longer one is not ours, nor a Redis key to look up


@dataclass
class ResponsesTranslation:
    chat: dict  # the internal chat-completions body
    conversation: list[dict]  # stored history + this request's input, as chat messages (no instructions)
    store: bool
    previous_response_id: str | None


def _text(content, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_request(f"{where}.content must be a string or a list of content parts", param=f"{where}.content")
    parts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in TEXT_PARTS or not isinstance(part.get("text"), str):
            raise bad_request(f"{where}.content[{j}]: content part type {kind!r} is not supported (text only)",
                              param=f"{where}.content[{j}].type", code="unsupported_value")
        parts.append(part["text"])
    return "".join(parts)


def _string(item: dict, key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise bad_request(f"{where}.{key} must be a non-empty string", param=f"{where}.{key}")
    return value


def input_messages(value) -> list[dict]:
    """`input` as chat messages; consecutive function_call items become one assistant turn."""
    if isinstance(value, str):
        if not value:
            raise bad_request("'input' must not be empty", param="input")
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise bad_request("'input' must be a string or a non-empty list of input items", param="input")
    messages: list[dict] = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise bad_request(f"{where} must be an object", param=where)
        kind = item.get("type", "message")
        if kind == "message":
            role = ROLES.get(item.get("role"))
            if role is None:
                raise bad_request(f"{where}.role must be one of {sorted(ROLES)}", param=f"{where}.role")
            messages.append({"role": role, "content": _text(item.get("content"), where)})
        elif kind == "function_call":
            call = {"id": _string(item, "call_id", where), "type": "function",
                    "function": {"name": _string(item, "name", where), "arguments": item.get("arguments") or "{}"}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls") and not last["content"]:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            if not isinstance(output, str):
                output = _text(output, where) if isinstance(output, list) else None
            if output is None:
                raise bad_request(f"{where}.output must be a string", param=f"{where}.output")
            messages.append({"role": "tool", "tool_call_id": _string(item, "call_id", where), "content": output})
        else:
            raise bad_request(f"{where}: input item type {kind!r} is not supported (message, function_call and "
                              "function_call_output are)", param=f"{where}.type", code="unsupported_value")
    return messages


def _tools(tools) -> list[dict]:
    out = []
    for i, tool, kind in tool_list(tools):
        if kind != "function":
            raise bad_request(f"tools[{i}]: tool type {kind!r} is not supported (built-in tools are not; "
                              "function tools are)", param=f"tools[{i}].type", code="unsupported_value")
        function = {"name": _string(tool, "name", f"tools[{i}]"),
                    "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}
        for key in ("description", "strict"):
            if tool.get(key) is not None:
                function[key] = tool[key]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice):
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise bad_request("'tool_choice' must be auto, none, required or {type: function, name}", param="tool_choice",
                      code="unsupported_value")


def _response_format(text):
    if not isinstance(text, dict) or set(text) - {"format"}:
        raise bad_request("'text' supports only 'format'", param="text", code="unsupported_value")
    fmt = text.get("format") or {"type": "text"}
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema" and isinstance(fmt.get("schema"), dict):
        schema = {"name": fmt.get("name") or "response", "schema": fmt["schema"]}
        if fmt.get("strict") is not None:
            schema["strict"] = fmt["strict"]
        return {"type": "json_schema", "json_schema": schema}
    raise bad_request("'text.format' must be text, json_object or json_schema with a schema",
                      param="text.format", code="unsupported_value")


def responses_to_chat(body: dict, history: list[dict] | None = None) -> ResponsesTranslation:
    check_top_level(body, FIELDS, "/v1/responses")
    conversation = [*(history or []), *input_messages(body.get("input"))]
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise bad_request("'instructions' must be a string", param="instructions")
    chat = {"model": body.get("model"),
            "messages": ([{"role": "system", "content": instructions}] if instructions else []) + conversation}
    if body.get("tools"):
        chat["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    if body.get("parallel_tool_calls") is not None:
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    if body.get("text") is not None and (fmt := _response_format(body["text"])) is not None:
        chat["response_format"] = fmt
    for ours, theirs in (("max_tokens", "max_output_tokens"), ("temperature", "temperature"), ("top_p", "top_p"),
                         ("user", "user"), ("cascade", "cascade")):
        if body.get(theirs) is not None:
            chat[ours] = body[theirs]
    if body.get("metadata") is not None and not isinstance(body["metadata"], dict):
        raise bad_request("'metadata' must be an object", param="metadata")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad_request("'stream' must be a boolean", param="stream")
    if stream:
        chat["stream"] = True
    store = body.get("store", True)
    if not isinstance(store, bool):
        raise bad_request("'store' must be a boolean", param="store")
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not 0 < len(previous) <= MAX_RESPONSE_ID):
        raise bad_request(f"'previous_response_id' must be a string of 1 to {MAX_RESPONSE_ID} characters "
                          "(a response id this gateway gave)", param="previous_response_id")
    return ResponsesTranslation(chat, conversation, store, previous)
