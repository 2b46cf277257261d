"""The prompt bound admission prices (wire/prompt_bound.py) is never beaten: for random chat
requests (emoji, CJK, controls, names, tool calls, tool results, tool definitions, a response
schema) the worker's own rendering (backends/serving/prompting.py) through each shipped
tokenizer that is prepared (SmolLM2's, Gemma 3's) has at most that many tokens, and MiniLM's
tokens of a text are at most its bytes. Guards issue 55 finding 1: 45d8644 priced a prompt at a
quarter of its characters (750 emoji: 187 estimated, 1,980 counted)."""
from __future__ import annotations

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.engine.model.models import load_tokenizer, model_dir
from backends.serving.prompting import chat_prompt_ids
from wire.prompt_bound import prompt_token_bound
from wire.requests import parse_chat, parse_completion

TOKENIZERS = ["smollm2-135m", "gemma3-270m"]
# text that tokenizes badly: emoji (4 UTF-8 bytes, escaped to 12 in JSON), CJK, combining marks, controls
ALPHABET = st.sampled_from(list(string.printable) + ["😀", "🧪", "漢", "字", "語", "é", "\u0301",
                                                       "\x00", "\x1b", "\u200b", "\u200d", "👩", "ß", "ي", "\ufffd"])
TEXT = st.text(ALPHABET, max_size=120)
NAME = st.from_regex(r"[A-Za-z0-9_]{1,12}", fullmatch=True)


def _tokenizer(name: str, chat: bool = False):
    """The tokenizer as the worker loads it; skipped where the model is not prepared (or, for a
    chat test, has no chat template: Gemma 3 270M is served for completions)."""
    folder = model_dir(name)
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"{name} is not prepared here")
    tokenizer = load_tokenizer(folder)
    if chat and not getattr(tokenizer, "chat_template", None):
        pytest.skip(f"{name} has no chat template")
    return tokenizer


@st.composite
def chat_bodies(draw) -> dict:
    messages = []
    for i in range(draw(st.integers(1, 5))):
        role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
        message = {"role": role, "content": draw(TEXT)}
        if role == "tool":
            message["tool_call_id"] = draw(NAME)
        if role == "assistant" and draw(st.booleans()):
            arguments = draw(st.dictionaries(NAME, TEXT | st.integers() | st.floats(allow_nan=False), max_size=3))
            message["tool_calls"] = [{"id": f"c{i}", "type": "function",
                                      "function": {"name": draw(NAME), "arguments": json.dumps(arguments)}}]
        if draw(st.booleans()):
            message["name"] = draw(NAME)
        messages.append(message)
    body = {"model": "m", "messages": messages}
    if draw(st.booleans()):
        body["tools"] = [{"type": "function", "function": {
            "name": draw(NAME), "description": draw(TEXT),
            "parameters": {"type": "object", "properties": {draw(NAME): {"type": "string", "description": draw(TEXT)}}}}}]
    if draw(st.booleans()):
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": {
            "type": "object", "properties": {draw(NAME): {"type": "string", "description": draw(TEXT)}}}}}
    return body


@pytest.mark.parametrize("name", TOKENIZERS)
def test_the_bound_holds_for_what_the_worker_renders(name):
    tokenizer = _tokenizer(name, chat=True)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(chat_bodies())
    def check(body):
        request = parse_chat(body)
        assert len(chat_prompt_ids(tokenizer, request)) <= prompt_token_bound(request)

    check()


@pytest.mark.parametrize("name", TOKENIZERS)
def test_the_measured_prompts_of_issue_55_stay_under_the_bound(name):
    """The shapes that were measured: 750 emoji, CJK, and ~24 KB of tool-call arguments."""
    tokenizer = _tokenizer(name, chat=True)
    arguments = json.dumps({"data": "😀漢" * 4000})
    for body in ({"model": "m", "messages": [{"role": "user", "content": "😀" * 750}]},
                 {"model": "m", "messages": [{"role": "user", "content": "漢字語" * 1000}]},
                 {"model": "m", "messages": [
                     {"role": "user", "content": "go"},
                     {"role": "assistant", "content": "", "tool_calls": [
                         {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
                     {"role": "tool", "tool_call_id": "c", "content": "🧪" * 500}]}):
        request = parse_chat(body)
        rendered = len(chat_prompt_ids(tokenizer, request))
        assert rendered <= prompt_token_bound(request), (rendered, prompt_token_bound(request))


@pytest.mark.parametrize("name", TOKENIZERS)
@settings(max_examples=100, deadline=None, derandomize=True)
@given(text=TEXT.filter(bool))
def test_the_bound_holds_for_a_completion_prompt(name, text):
    request = parse_completion({"model": "m", "prompt": text})
    assert len(_cached(name).encode(text)) <= prompt_token_bound(request)


def test_no_minilm_token_is_shorter_than_a_byte():
    from tokenizers import Tokenizer

    from classifier.embeddings import model_source
    tokenizer = Tokenizer.from_file(str(model_source() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()

    @settings(max_examples=200, deadline=None, derandomize=True)
    @given(TEXT)
    def check(text):
        encoded = tokenizer.encode(text)
        tokens = len(encoded.ids) - sum(encoded.special_tokens_mask)  # less [CLS] and [SEP]
        assert tokens <= len(text.encode("utf-8", "surrogatepass"))

    check()


_TOKENIZERS: dict = {}


def _cached(name: str):
    if name not in _TOKENIZERS:
        _TOKENIZERS[name] = _tokenizer(name)
    return _TOKENIZERS[name]
