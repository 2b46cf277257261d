"""wire/anthropic_request.py and wire/anthropic_output.py as pure functions."""
import json

import pytest

from wire.anthropic_output import MessagesStream, completion_to_message, error_body
from wire.anthropic_request import messages_to_chat
from wire.errors import OpenAIError

TOOL = {"name": "get_weather", "description": "Weather of a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def test_text_system_and_sampling():
    chat = messages_to_chat({"model": "claude-x", "max_tokens": 20, "system": [{"type": "text", "text": "Be kind."}],
                             "messages": [{"role": "user", "content": "Hi"}], "stop_sequences": ["END"],
                             "temperature": 0.5, "top_k": 5, "stream": True})
    assert chat == {"model": "claude-x", "max_tokens": 20, "stream": True, "stop": ["END"], "temperature": 0.5,
                    "top_k": 5, "messages": [{"role": "system", "content": "Be kind."},
                                             {"role": "user", "content": "Hi"}]}


def test_tool_use_and_tool_result_round_trip():
    chat = messages_to_chat({"model": "m", "max_tokens": 5, "tools": [TOOL], "tool_choice": {"type": "any"},
                             "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                           "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": [{"type": "text", "text": "5C"}]},
                                     {"type": "text", "text": "And tomorrow?"}]}]})
    msgs = chat["messages"]
    assert msgs[1]["tool_calls"][0]["id"] == "toolu_1"
    assert json.loads(msgs[1]["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
    assert msgs[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "5C"}
    assert msgs[3] == {"role": "user", "content": "And tomorrow?"}
    assert chat["tool_choice"] == "required" and chat["tools"][0]["function"]["parameters"] == TOOL["input_schema"]


@pytest.mark.parametrize("body, param", [
    ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
     "messages[0].content[0].type"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0]"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "thinking": {}}, "thinking"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "temperature": 1.5},
     "temperature"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
])
def test_unsupported_things_are_named(body, param):
    with pytest.raises(OpenAIError) as err:
        messages_to_chat(body)
    assert err.value.status == 400 and err.value.param == param


def test_whole_completion_to_message():
    message = completion_to_message({"choices": [{"finish_reason": "tool_calls", "message": {
        "content": "", "tool_calls": [{"id": "call_1", "function": {"name": "f", "arguments": '{"a": 1}'}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2}}, "claude-x")
    assert message["stop_reason"] == "tool_use" and message["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": 1}}]
    assert message["usage"]["input_tokens"] == 3 and message["usage"]["output_tokens"] == 2


def test_stream_event_sequence():
    s = MessagesStream("claude-x")
    events = s.feed({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
    events += s.feed({"choices": [{"delta": {"content": "Hi"}}]})
    events += s.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_1",
                                                             "function": {"name": "f", "arguments": '{"a":'}}]}}]})
    events += s.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]},
                                   "finish_reason": "tool_calls"}]})
    events += s.feed({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3}})
    events += s.end()
    assert [n for n, _ in events] == ["message_start", "content_block_start", "content_block_delta",
                                      "content_block_stop", "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    assert events[5][1]["delta"] == {"type": "input_json_delta", "partial_json": '{"a":'}
    assert events[4][1]["index"] == 1 and events[4][1]["content_block"]["name"] == "f"
    assert events[8][1]["delta"]["stop_reason"] == "tool_use" and events[8][1]["usage"]["output_tokens"] == 3


def test_error_body_shape():
    assert error_body(429, "slow down") == {"type": "error", "error": {"type": "rate_limit_error",
                                                                       "message": "slow down"}}
