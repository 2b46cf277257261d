"""/v1/messages with the official anthropic SDK against a live gateway and a real worker: create and
stream, a Claude-style name through a config alias, x-api-key and bearer auth, Anthropic-shaped
errors, one usage record per request and the same tenant limits."""
from __future__ import annotations


import aiohttp
import anthropic
import pytest

from tests.gateway.dropin_stack import KEYS, module_stack

HELLO = [{"role": "user", "content": "Say hello."}]

stack = module_stack("messages")


def test_create_through_a_claude_alias(stack):
    before = len(stack.usage_records())
    with stack.anthropic() as client:
        raw = client.messages.with_raw_response.create(model="claude-sonnet-4-6", max_tokens=8, messages=HELLO,
                                                       system="Answer briefly.", extra_body={"temperature": 0})
        message = raw.parse()
    assert raw.headers["x-tiergate-tier"] == "small"
    assert message.type == "message" and message.role == "assistant" and message.content[0].type == "text"
    assert message.content[0].text and message.stop_reason in ("end_turn", "max_tokens")
    assert 0 < message.usage.output_tokens <= 8 and message.usage.input_tokens > 0
    records = stack.usage_records(before + 1)
    assert len(records) == before + 1
    assert (records[-1].prompt_tokens, records[-1].completion_tokens) == \
        (message.usage.input_tokens, message.usage.output_tokens)


def test_stream_helper_and_event_sequence(stack):
    before = len(stack.usage_records())
    with stack.anthropic() as client:
        with client.messages.stream(model="claude-sonnet-4-6", max_tokens=8, messages=HELLO, extra_body={"temperature": 0}) as s:
            text = "".join(s.text_stream)
            final = s.get_final_message()
        kinds = [e.type for e in client.messages.create(model="small", max_tokens=6, messages=HELLO, stream=True)]
    assert text and final.content[0].text == text and final.stop_reason in ("end_turn", "max_tokens")
    assert final.usage.output_tokens > 0 and final.usage.input_tokens > 0
    assert kinds[:2] == ["message_start", "content_block_start"] and "content_block_delta" in kinds
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    records = stack.usage_records(before + 2)
    assert len(records) == before + 2
    assert final.usage.output_tokens in [r.completion_tokens for r in records[before:]]


async def test_bearer_auth_and_anthropic_errors(stack):
    async with aiohttp.ClientSession() as http:
        body = {"model": "small", "max_tokens": 4, "messages": HELLO}
        async with http.post(stack.url + "/v1/messages", json=body,
                             headers={"Authorization": f"Bearer {KEYS['beta']}"}) as response:
            assert response.status == 200 and (await response.json())["type"] == "message"
        async with http.post(stack.url + "/v1/messages", json={"model": "small", "messages": HELLO},
                             headers={"x-api-key": KEYS["beta"]}) as response:
            error = await response.json()
            assert response.status == 400 and error["type"] == "error"
            assert error["error"]["type"] == "invalid_request_error" and "max_tokens" in error["error"]["message"]
    with anthropic.Anthropic(base_url=stack.url, api_key="sk-nope", max_retries=0) as bad:
        with pytest.raises(anthropic.AuthenticationError) as err:
            bad.messages.create(model="small", max_tokens=4, messages=HELLO)
        assert err.value.body["error"]["type"] == "authentication_error"
    with stack.anthropic() as client:
        with pytest.raises(anthropic.BadRequestError) as err:
            client.messages.create(model="small", max_tokens=4, messages=[{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}])
        assert "image" in err.value.body["error"]["message"]
        with pytest.raises(anthropic.NotFoundError):
            client.messages.create(model="claude-unknown", max_tokens=4, messages=HELLO)


def test_same_tenant_rate_limit(stack):
    with stack.anthropic("limited") as client:
        for _ in range(2):
            client.messages.create(model="small", max_tokens=2, messages=HELLO)
        with pytest.raises(anthropic.RateLimitError) as err:
            client.messages.create(model="small", max_tokens=2, messages=HELLO)
    assert err.value.body["error"]["type"] == "rate_limit_error"


WEATHER = {"name": "get_weather", "description": "Current weather of a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                            "additionalProperties": False}}
ASK = {"role": "user", "content": "What is the weather in Oslo?"}


def test_tool_use_and_tool_result_round_trip(stack):
    with stack.anthropic() as client:
        first = client.messages.create(model="claude-sonnet-4-6", max_tokens=40, tools=[WEATHER], messages=[ASK],
                                       tool_choice={"type": "tool", "name": "get_weather"},
                                       extra_body={"temperature": 0})
        use = next(block for block in first.content if block.type == "tool_use")
        assert first.stop_reason == "tool_use" and use.name == "get_weather" and isinstance(use.input["city"], str)
        answer = client.messages.create(model="claude-sonnet-4-6", max_tokens=12, tools=[WEATHER],
                                        tool_choice={"type": "none"}, extra_body={"temperature": 0}, messages=[
            ASK, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "5 degrees"}]}])
    assert answer.content and answer.content[0].type == "text" and answer.content[0].text
    assert answer.usage.input_tokens > first.usage.input_tokens


def test_streamed_tool_use(stack):
    with stack.anthropic() as client:
        with client.messages.stream(model="small", max_tokens=40, tools=[WEATHER], messages=[ASK],
                                    tool_choice={"type": "any"}, extra_body={"temperature": 0}) as s:
            kinds = [event.type for event in s]
            final = s.get_final_message()
    use = next(block for block in final.content if block.type == "tool_use")
    assert final.stop_reason == "tool_use" and isinstance(use.input["city"], str)
    assert "content_block_delta" in kinds and kinds[-1] == "message_stop"
