"""wire/responses_request.py and wire/responses_output.py as pure functions."""
import json

import pytest

from wire.errors import OpenAIError
from wire.responses_output import ResponsesStream, assistant_message, completion_to_response
from wire.responses_request import responses_to_chat

TOOL = {"type": "function", "name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def test_string_input_instructions_and_sampling():
    t = responses_to_chat({"model": "auto", "input": "Hi", "instructions": "Be brief.", "max_output_tokens": 9,
                           "temperature": 0.2, "top_p": 0.5, "stream": True})
    assert t.chat == {"model": "auto", "messages": [{"role": "system", "content": "Be brief."},
                                                    {"role": "user", "content": "Hi"}],
                      "max_tokens": 9, "temperature": 0.2, "top_p": 0.5, "stream": True}
    assert t.conversation == [{"role": "user", "content": "Hi"}]  # instructions are not carried over
    assert t.store is True and t.previous_response_id is None


def test_items_tools_and_format():
    t = responses_to_chat({
        "model": "m", "tools": [TOOL], "tool_choice": {"type": "function", "name": "get_weather"},
        "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}, "strict": True}},
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]},
                  {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
                  {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": '{"city":"Bergen"}'},
                  {"type": "function_call_output", "call_id": "c1", "output": "5C"}]},
        history=[{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"}])
    msgs = t.chat["messages"]
    assert msgs[:3] == [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"},
                        {"role": "user", "content": "Weather in Oslo?"}]
    assert [c["id"] for c in msgs[3]["tool_calls"]] == ["c1", "c2"]  # one assistant turn, two calls
    assert msgs[4] == {"role": "tool", "tool_call_id": "c1", "content": "5C"}
    assert t.chat["tools"][0]["function"]["name"] == "get_weather"
    assert t.chat["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert t.chat["response_format"]["json_schema"]["strict"] is True


@pytest.mark.parametrize("body, param", [
    ({"model": "m", "input": [{"type": "reasoning", "summary": []}]}, "input[0].type"),
    ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0].type"),
    ({"model": "m", "input": "x", "tools": [{"type": "web_search_preview"}]}, "tools[0].type"),
    ({"model": "m", "input": "x", "reasoning": {"effort": "low"}}, "reasoning"),
    ({"model": "m", "input": "x", "text": {"format": {"type": "grammar"}}}, "text.format"),
    ({"model": "m", "input": ""}, "input"),
    ({"input": "x"}, "model"),
    ({"model": "m", "input": "x", "previous_response_id": "resp_" + "a" * 200}, "previous_response_id"),
])
def test_unsupported_things_are_named(body, param):
    with pytest.raises(OpenAIError) as err:
        responses_to_chat(body)
    assert err.value.status == 400 and err.value.param == param


def test_whole_completion_to_response():
    completion = {"choices": [{"finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}]}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 7}}
    response = completion_to_response(completion, {"model": "auto", "input": "x"}, "resp_1", "auto")
    assert response["status"] == "completed" and response["usage"]["total_tokens"] == 19
    assert [i["type"] for i in response["output"]] == ["message", "function_call"]
    assert response["output"][1]["call_id"] == "call_1"
    assert assistant_message(response) == {"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}]}


def test_length_finish_is_incomplete():
    completion = {"choices": [{"finish_reason": "length", "message": {"content": "abc"}}], "usage": {}}
    response = completion_to_response(completion, {"model": "m"}, "resp_2", "m")
    assert response["status"] == "incomplete" and response["incomplete_details"] == {"reason": "max_output_tokens"}


def test_stream_event_sequence():
    s = ResponsesStream({"model": "m"}, "resp_3", "m")
    events = s.feed({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
    events += s.feed({"choices": [{"delta": {"content": "Hel"}}]})
    events += s.feed({"choices": [{"delta": {"content": "lo"}}]})
    events += s.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                                             "function": {"name": "f", "arguments": '{"a"'}}]}}]})
    events += s.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ':1}'}}]},
                                   "finish_reason": "tool_calls"}]})
    events += s.feed({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4}})
    events += s.end()
    names = [name for name, _ in events]
    assert names == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
                     "response.output_text.done", "response.content_part.done", "response.output_item.done",
                     "response.output_item.added", "response.function_call_arguments.delta",
                     "response.function_call_arguments.delta", "response.function_call_arguments.done",
                     "response.output_item.done", "response.completed"]
    assert [p["sequence_number"] for _, p in events] == list(range(len(events)))
    done = events[-1][1]["response"]
    assert done["usage"]["input_tokens"] == 5 and done["output"][0]["content"][0]["text"] == "Hello"
    assert json.loads(done["output"][1]["arguments"]) == {"a": 1}
    assert [p["output_index"] for n, p in events if n == "response.output_item.added"] == [0, 1]
