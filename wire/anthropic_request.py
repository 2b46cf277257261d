"""Anthropic Messages API request -> internal chat-completions request body (a pure function).

Supported: `system` (string or text blocks), `messages` with text, tool_use and tool_result
blocks, client `tools`, `tool_choice` (auto, any, tool, none), `max_tokens` (required, as in
the Messages API), `stop_sequences`, `temperature`, `top_p`, `top_k`, `stream`, `metadata`.
Images, documents, thinking, server tools and any other field are a 400 naming them.
"""
from __future__ import annotations

import json

from .chat_stream import check_top_level, tool_list
from .errors import bad_request

FIELDS = {"model", "messages", "system", "max_tokens", "stop_sequences", "temperature", "top_p", "top_k", "stream",
          "tools", "tool_choice", "metadata", "cascade"}  # cascade: the gateway's own (docs/routing.md)


def _blocks(content, where: str) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise bad_request(f"{where}.content must be a string or a list of content blocks", param=f"{where}.content")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") not in ("text", "tool_use", "tool_result"):
            kind = block.get("type") if isinstance(block, dict) else None
            raise bad_request(f"{where}.content[{j}]: block type {kind!r} is not supported (text, tool_use and "
                              "tool_result are)", param=f"{where}.content[{j}].type", code="unsupported_value")
    return content


def _text_of(block_content, where: str) -> str:
    if block_content is None:
        return ""
    if isinstance(block_content, str):
        return block_content
    texts = []
    for block in _blocks(block_content, where):
        if block["type"] != "text":
            raise bad_request(f"{where}: a tool_result may only hold text", param=where, code="unsupported_value")
        texts.append(block.get("text") or "")
    return "".join(texts)


def _message(message, i: int) -> list[dict]:
    where = f"messages[{i}]"
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        raise bad_request(f"{where}.role must be 'user' or 'assistant'", param=f"{where}.role")
    role, blocks = message["role"], _blocks(message.get("content"), where)
    text = "".join(b.get("text") or "" for b in blocks if b["type"] == "text")
    calls = [b for b in blocks if b["type"] == "tool_use"]
    results = [b for b in blocks if b["type"] == "tool_result"]
    if role == "assistant":
        if results:
            raise bad_request(f"{where}: tool_result blocks belong in user messages", param=f"{where}.content")
        out = {"role": "assistant", "content": text}
        if calls:
            out["tool_calls"] = [{"id": c.get("id"), "type": "function",
                                  "function": {"name": c.get("name"),
                                               "arguments": json.dumps(c.get("input") or {}, ensure_ascii=False)}}
                                 for c in calls]
        return [out]
    if calls:
        raise bad_request(f"{where}: tool_use blocks belong in assistant messages", param=f"{where}.content")
    out = []
    for j, result in enumerate(results):  # tool answers first: they reply to the previous assistant turn
        content = _text_of(result.get("content"), f"{where}.content[{j}].content")
        if result.get("is_error"):
            content = f"Error: {content}"
        out.append({"role": "tool", "tool_call_id": result.get("tool_use_id"), "content": content})
    if text or not results:
        out.append({"role": "user", "content": text})
    return out


def _tools(tools) -> list[dict]:
    out = []
    for i, tool, kind in tool_list(tools):
        if not isinstance(tool, dict) or kind not in (None, "custom") or "input_schema" not in tool:
            raise bad_request(f"tools[{i}]: tool type {kind!r} is not supported (server tools are not; client "
                              "tools with an input_schema are)", param=f"tools[{i}]", code="unsupported_value")
        function = {"name": tool.get("name"), "parameters": tool["input_schema"]}
        if tool.get("description"):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice):
    kind = choice.get("type") if isinstance(choice, dict) else None
    if isinstance(choice, dict) and choice.get("disable_parallel_tool_use"):
        raise bad_request("'tool_choice.disable_parallel_tool_use' is not supported",
                          param="tool_choice.disable_parallel_tool_use", code="unsupported_value")
    if kind in ("auto", "none"):
        return kind
    if kind == "any":
        return "required"
    if kind == "tool" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise bad_request("'tool_choice.type' must be auto, any, tool or none", param="tool_choice",
                      code="unsupported_value")


def messages_to_chat(body: dict) -> dict:
    check_top_level(body, FIELDS, "/v1/messages")
    if not isinstance(body.get("max_tokens"), int) or isinstance(body.get("max_tokens"), bool) \
            or body["max_tokens"] < 1:
        raise bad_request("'max_tokens' is required and must be a positive integer", param="max_tokens")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty list", param="messages")
    chat_messages = []
    if body.get("system"):
        chat_messages.append({"role": "system", "content": _text_of(body["system"], "system")})
    for i, message in enumerate(messages):
        chat_messages += _message(message, i)
    chat = {"model": body.get("model"), "messages": chat_messages, "max_tokens": body["max_tokens"]}
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise bad_request("'stop_sequences' must be a list of non-empty strings", param="stop_sequences")
        if stops:
            chat["stop"] = stops
    for name in ("temperature", "top_p", "top_k", "cascade"):
        if body.get(name) is not None:
            chat[name] = body[name]
    temperature = body.get("temperature")
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
                                    or not 0 <= temperature <= 1):
        raise bad_request("'temperature' must be between 0 and 1", param="temperature")
    if body.get("tools"):
        chat["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    if body.get("stream"):
        chat["stream"] = True
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict) or set(metadata) - {"user_id"}:
        raise bad_request("'metadata' may only hold 'user_id'", param="metadata")
    user = metadata.get("user_id")
    if user:
        chat["user"] = user
    return chat
