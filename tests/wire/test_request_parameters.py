"""Request validation: every parameter is honoured (parsed into typed settings) or refused by name."""
import pytest

from wire.errors import OpenAIError
from wire.requests import parse_chat, parse_completion

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
COMPLETION = {"model": "m", "prompt": "hi"}
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "weather",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def _refused(parse, body: dict) -> OpenAIError:
    with pytest.raises(OpenAIError) as err:
        parse(body)
    assert err.value.status == 400
    return err.value


@pytest.mark.parametrize("name, value", [
    ("audio", {"voice": "alloy", "format": "wav"}), ("modalities", ["text", "audio"]), ("prediction", {"type": "content"}),
    ("web_search_options", {}), ("functions", [{"name": "f"}]), ("reasoning_effort", "low"), ("store", True),
    ("metadata", {"a": "b"}), ("base_url", "http://x"), ("service_tier", "flex"), ("stream_options", {"url": "x"}),
])
def test_chat_refuses_unsupported_parameters_by_name(name, value):
    err = _refused(parse_chat, {**CHAT, name: value})
    assert err.param.startswith(name)


@pytest.mark.parametrize("name, value", [("echo", True), ("suffix", "x"), ("best_of", 3), ("tools", [TOOL]),
                                         ("messages", [{"role": "user", "content": "x"}])])
def test_completions_refuse_unsupported_parameters_by_name(name, value):
    assert _refused(parse_completion, {**COMPLETION, name: value}).param == name


def test_supported_parameters_are_parsed():
    params = parse_chat({**CHAT, "n": 3, "logprobs": True, "top_logprobs": 4, "presence_penalty": 0.5,
                         "frequency_penalty": -0.5, "repetition_penalty": 1.2, "logit_bias": {"42": -100},
                         "tools": [TOOL], "tool_choice": "required", "parallel_tool_calls": False,
                         "modalities": ["text"], "store": False, "user": "u1",
                         "response_format": {"type": "json_schema",
                                             "json_schema": {"name": "x", "strict": True, "schema": {"type": "object"}}}}).params
    assert params.n == 3 and params.surface.logprobs and params.surface.top_logprobs == 4
    assert params.surface.logit_bias == {42: -100.0} and params.surface.repetition_penalty == 1.2
    assert params.tool_choice.mode == "required" and params.tools[0].name == "get_weather"
    assert not params.parallel_tool_calls
    assert params.response_format.strict and params.response_format.schema == {"type": "object"}
    assert params.temperature is None  # unset: the worker fills in the model's generation default


def test_completion_logprobs_is_a_count():
    assert parse_completion({**COMPLETION, "logprobs": 3}).params.surface.top_logprobs == 3
    assert _refused(parse_completion, {**COMPLETION, "logprobs": 99}).param == "logprobs"


@pytest.mark.parametrize("body, param", [
    ({"n": 1000}, "n"), ({"top_logprobs": 2}, "top_logprobs"), ({"logit_bias": {"x": 1}}, "logit_bias"),
    ({"tool_choice": "required"}, "tool_choice"), ({"tools": [TOOL], "tool_choice": {"type": "function",
                                                   "function": {"name": "nope"}}}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}}},
     "response_format.json_schema.schema"),
    ({"response_format": {"type": "yaml"}}, "response_format"),
])
def test_bad_values_name_their_parameter(body, param):
    assert _refused(parse_chat, {**CHAT, **body}).param == param


def test_tool_turns_survive_normalisation():
    messages = [{"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    parsed = parse_chat({**CHAT, "messages": messages}).messages
    assert parsed[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": {"city": "Oslo"}}
    assert parsed[1]["content"] == "" and parsed[2]["tool_call_id"] == "call_1"
    assert _refused(parse_chat, {**CHAT, "messages": [{"role": "tool", "content": "x"}]}).param == "messages[0].tool_call_id"
