"""Prompts that cost many more tokens than their characters suggest (issue 55's measurements):
~6,000 tokens in one tool call's arguments, a tool definition as large, and 750 emoji; and the
count a real worker gives them (SmolLM2's template and tokenizer, as backends/serving/prompting.py
renders the messages), for fake upstreams to report. Shared by benchmarks.tenancy_bounds and
the billing tests."""
from __future__ import annotations

import functools
import json

from wire.requests import parse_chat

ARGUMENTS = json.dumps({"rows": [{"id": i, "note": f"entry {i} of the export, checked"} for i in range(520)]})
TOOL = {"type": "function", "function": {
    "name": "export", "description": " ".join(f"field{i} is a value of the export;" for i in range(1200)),
    "parameters": {"type": "object", "properties": {"rows": {"type": "array"}}}}}

PROMPTS = {
    "tool_calls": [{"role": "user", "content": "continue"},
                   {"role": "assistant", "content": "", "tool_calls": [
                       {"id": "c1", "type": "function", "function": {"name": "export", "arguments": ARGUMENTS}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "done"}],
    "tool_definitions": [{"role": "user", "content": "which field holds the date?"}],
    "emoji": [{"role": "user", "content": "😀" * 750}],
}


def body(kind: str, model: str, max_tokens: int = 1, **more) -> dict:
    """A chat body of `kind` (a key of PROMPTS) for `model`."""
    out = {"model": model, "messages": PROMPTS[kind], "max_tokens": max_tokens, **more}
    if kind == "tool_definitions":
        out["tools"] = [TOOL]
    return out


@functools.lru_cache(maxsize=1)
def _smollm2():
    from backends.engine.model.models import load_tokenizer, model_dir
    return load_tokenizer(model_dir("smollm2-135m"))


def worker_prompt_tokens(sent: dict) -> int:
    """The prompt tokens a SmolLM2 worker counts for the chat body `sent` (what it renders)."""
    from backends.serving.cache_salt import take_cache_salt
    from backends.serving.prompting import chat_prompt_ids
    body = dict(sent)
    take_cache_salt(body)  # the gateway's field, as the worker takes it before parsing
    return len(chat_prompt_ids(_smollm2(), parse_chat(body)))
