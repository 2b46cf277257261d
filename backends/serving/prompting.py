"""Chat messages (and tools) into prompt token ids through the model's chat template.

Where the template knows tools (it refers to `tools`), it gets the tools and the
messages with their `tool_calls` / `tool_call_id` as transformers expects them.
Otherwise the generic format (documented in the README) is used: the tool list and the
call convention go into the system message, earlier calls are written back as
`<tool_call>` lines and tool results as user turns wrapped in `<tool_response>`.
"""
from __future__ import annotations

import json

from wire.requests import ChatRequest

from .tool_grammar import CALL_CLOSE, CALL_OPEN

GENERIC_TOOL_PROMPT = (
    "You can call functions. Each available function, as JSON:\n{tools}\n"
    "To call functions, reply only with one line per call of the form\n"
    + CALL_OPEN + '{{"name": "<function name>", "arguments": {{<arguments as JSON>}}}}' + CALL_CLOSE + "\n"
    "Function results come back in <tool_response> tags. Otherwise answer normally."
)


def _template_knows_tools(tokenizer) -> bool:
    return "tools" in (getattr(tokenizer, "chat_template", None) or "")


def _call_line(call: dict) -> str:
    fn = call["function"]
    return CALL_OPEN + json.dumps({"name": fn["name"], "arguments": fn["arguments"]}) + CALL_CLOSE


def generic_tool_messages(messages: list[dict], tools: list[dict] | None) -> list[dict]:
    """Messages in plain roles and text only, for templates without tool support."""
    out = []
    for message in messages:
        if message["role"] == "tool":
            response = {"tool_call_id": message["tool_call_id"], "content": message["content"]}
            out.append({"role": "user", "content": f"<tool_response>{json.dumps(response)}</tool_response>"})
        elif message.get("tool_calls"):
            lines = [message["content"]] if message["content"] else []
            out.append({"role": "assistant", "content": "\n".join(lines + [_call_line(c) for c in message["tool_calls"]])})
        else:
            out.append({"role": message["role"], "content": message["content"]})
    if tools:
        listing = GENERIC_TOOL_PROMPT.format(tools="\n".join(json.dumps(t["function"]) for t in tools))
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + listing}
        else:
            out.insert(0, {"role": "system", "content": listing})
    return out


def chat_prompt_ids(tokenizer, request: ChatRequest) -> list[int]:
    params = request.params
    tools = [t.as_openai() for t in params.tools] if params.tools else None
    messages = request.messages
    has_tool_turns = any(m["role"] == "tool" or m.get("tool_calls") for m in messages)
    if _template_knows_tools(tokenizer):
        ids = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True,
                                            return_dict=False)
    else:
        if tools or has_tool_turns:
            messages = generic_tool_messages(messages, tools)
        else:
            messages = [{"role": m["role"], "content": m["content"]} for m in messages]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    return list(ids)
