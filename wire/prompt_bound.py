"""An upper bound on the prompt tokens a worker renders for a request, that a tenant cannot beat:
admission prices the prompt from it (money only; routing's context fit keeps its estimate).

A token of the shipped tokenizers covers at least one byte of the text it encodes (byte-level
BPE, WordPiece, SentencePiece with byte fallback; tests/wire/test_prompt_bound.py checks it), so
the tokens of a text are at most its UTF-8 bytes. What the worker renders beyond the client's text
(special tokens, a default system prompt, the tool preamble and call wrappers of
backends/serving/prompting.py) is paid for by the allowances below. JSON the worker writes into
the prompt (tools, tool calls, tool results, the response schema) is counted as `json.dumps`
writes it: ASCII, escapes included, never shorter than its UTF-8.
"""
from __future__ import annotations

import json

from .requests import ChatRequest, CompletionRequest

BASE_TOKENS = 128        # BOS, a template's default system prompt and its generation prompt
PER_MESSAGE_TOKENS = 32  # a template's markers around one message, a tool call's or result's wrapper
TOOLS_TOKENS = 512       # the worker's preamble when tools or tool turns are rendered (prompting.py)


def _utf8(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _json(value) -> int:
    return len(json.dumps(value))  # ensure_ascii: every non-ASCII character as its escape


def _message_bytes(message: dict) -> int:
    size = _utf8(message["role"]) + _utf8(message.get("name") or "")
    if message["role"] == "tool":  # written back as JSON: the content escaped
        return size + _json({"tool_call_id": message["tool_call_id"], "content": message["content"]})
    size += _utf8(message["content"])
    calls = message.get("tool_calls")
    return size + (_json(calls) + PER_MESSAGE_TOKENS * len(calls) if calls else 0)


def prompt_token_bound(parsed: ChatRequest | CompletionRequest) -> int:
    """At most how many prompt tokens the worker renders for `parsed` (all n choices share them)."""
    if isinstance(parsed, CompletionRequest):
        prompt = parsed.prompt
        return BASE_TOKENS + (_utf8(prompt) if isinstance(prompt, str) else len(prompt))
    params = parsed.params
    size, tooled = BASE_TOKENS, bool(params.tools)
    for message in parsed.messages:  # one pass: every admitted request is bounded
        size += _message_bytes(message) + PER_MESSAGE_TOKENS
        tooled = tooled or message["role"] == "tool" or bool(message.get("tool_calls"))
    if tooled:
        size += TOOLS_TOKENS + sum(_json(t.as_openai()) for t in params.tools)
    schema = params.response_format.schema if params.response_format is not None else None
    return size + (_json(schema) if schema else 0)


def inputs_token_bound(inputs: list) -> int:
    """At most the tokens an embeddings worker encodes for `inputs`: each text's bytes and its
    special tokens ([CLS], [SEP]), each list of token ids as it is."""
    return sum(len(x) if isinstance(x, list) else _utf8(x) + 2 for x in inputs)
