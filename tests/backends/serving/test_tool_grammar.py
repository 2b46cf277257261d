"""The output grammar of tool calls and the generic tool prompt, checked with the real SmolLM2 tokenizer,
plus the model generation defaults."""
import json

import pytest

from backends.engine.structured.grammar import GrammarCompiler
from backends.engine.model.models import load_tokenizer, model_dir
from backends.serving.generation_defaults import read_generation_defaults, setting
from backends.serving.prompting import generic_tool_messages
from backends.serving.tool_calls import ToolCallStream, parse_tool_calls
from backends.serving.tool_grammar import output_grammar
from wire.requests import parse_chat

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CALL = '<tool_call>{"name":"get_weather","arguments":{"city":"Oslo"}}</tool_call>'


@pytest.fixture(scope="module")
def compiler():
    tokenizer = load_tokenizer(model_dir("smollm2-135m"))
    return GrammarCompiler(tokenizer, len(tokenizer), {tokenizer.eos_token_id}), tokenizer


def _accepts(compiler, body: dict, text: str) -> bool:
    grammars, tokenizer = compiler
    matcher = grammars.matcher(output_grammar(parse_chat({"model": "m", "messages": [
        {"role": "user", "content": "x"}], **body}).params))
    return matcher.consume_tokens(tokenizer.encode(text)) and matcher.is_accepting()


def test_required_allows_only_calls_and_parallel_false_only_one(compiler):
    required = {"tools": [TOOL], "tool_choice": "required"}
    assert _accepts(compiler, required, CALL) and _accepts(compiler, required, CALL + CALL)
    assert not _accepts(compiler, required, "It is sunny.")
    assert not _accepts(compiler, required, CALL.replace('"city"', '"town"'))  # arguments follow the schema
    assert not _accepts(compiler, {**required, "parallel_tool_calls": False}, CALL + CALL)


def test_auto_allows_text_or_calls_and_json_answers_when_asked(compiler):
    auto = {"tools": [TOOL]}
    assert _accepts(compiler, auto, "It is sunny.") and _accepts(compiler, auto, CALL)
    with_json = {**auto, "response_format": {"type": "json_object"}}
    assert _accepts(compiler, with_json, '{"a":1}') and _accepts(compiler, with_json, CALL)
    assert not _accepts(compiler, with_json, "It is sunny.")


def test_tool_calls_read_back_whole_and_streamed():
    calls = parse_tool_calls(CALL + CALL)
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Oslo"}] * 2
    assert parse_tool_calls("Sure. " + CALL) is None  # text around calls is a plain answer
    stream, calls = ToolCallStream(), []
    for i in range(0, len(CALL) * 2, 3):  # two calls, three characters at a time
        text, deltas = stream.feed((CALL + CALL)[i:i + 3], final=False)
        assert text == ""
        calls.extend(deltas)
    assert stream.num_calls == 2 and sum(1 for d in calls if "id" in d) == 2
    assert [d["function"]["name"] for d in calls if "id" in d] == ["get_weather"] * 2
    for index in (0, 1):
        arguments = "".join(d["function"]["arguments"] for d in calls if d["index"] == index)
        assert json.loads(arguments) == {"city": "Oslo"}
    assert len(calls) > 4  # the arguments came in several pieces
    text_stream = ToolCallStream()
    assert text_stream.feed("<t", False) == ("", []) and text_stream.feed("ea time", False) == ("<tea time", [])


def test_generic_tool_format_keeps_calls_and_results():
    messages = parse_chat({"model": "m", "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]}).messages
    out = generic_tool_messages(messages, [TOOL])
    assert out[0]["content"].startswith("Be brief.") and "get_weather" in out[0]["content"]
    assert out[2] == {"role": "assistant", "content": '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'}
    assert out[3]["role"] == "user" and "sunny" in out[3]["content"] and "c1" in out[3]["content"]


def test_generation_defaults_come_from_the_generation_config(tmp_path):
    (tmp_path / "generation_config.json").write_text(json.dumps(
        {"temperature": 0.6, "top_p": 0.9, "do_sample": True, "max_new_tokens": 300, "eos_token_id": 2}))
    defaults = read_generation_defaults(tmp_path)
    assert defaults == {"temperature": 0.6, "top_p": 0.9, "max_tokens": 300}
    assert setting("temperature", None, defaults) == 0.6 and setting("temperature", 0.0, defaults) == 0.0
    assert setting("top_k", None, defaults) == 0  # OpenAI's default where the model states none
    assert read_generation_defaults(model_dir("smollm2-135m")) == {}


def test_a_template_that_knows_tools_gets_them_and_the_tool_turns(compiler):
    from backends.serving.prompting import chat_prompt_ids

    _, tokenizer = compiler
    tokenizer = tokenizer.__class__(tokenizer_object=tokenizer.backend_tokenizer)
    tokenizer.chat_template = (
        "{% for t in tools or [] %}TOOL {{ t.function.name }};{% endfor %}"
        "{% for m in messages %}[{{ m.role }}]{% if m.tool_calls %}CALL {{ m.tool_calls[0].function.name }}"
        "({{ m.tool_calls[0].function.arguments.city }}){% else %}{{ m.content }}{% endif %}"
        "{% if m.tool_call_id %}#{{ m.tool_call_id }}{% endif %}{% endfor %}")
    request = parse_chat({"model": "m", "tools": [TOOL], "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]})
    text = tokenizer.decode(chat_prompt_ids(tokenizer, request))
    assert text == "TOOL get_weather;[user]Weather?[assistant]CALL get_weather(Oslo)[tool]sunny#c1"
