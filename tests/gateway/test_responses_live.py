"""/v1/responses with the official openai SDK against a live gateway and a real worker: whole and
streamed answers, stored conversations (previous_response_id) scoped to the tenant, one usage
record per request, and named 400s."""
from __future__ import annotations


import json

import openai
import pytest

from tests.gateway.dropin_stack import module_stack

stack = module_stack("responses")


def test_whole_response_and_one_usage_record(stack):
    before = len(stack.usage_records())
    with stack.openai() as client:
        response = client.responses.create(model="small", input="Say hello.", instructions="Answer briefly.",
                                           max_output_tokens=8, temperature=0)
    assert response.object == "response" and response.id.startswith("resp_")
    assert response.status in ("completed", "incomplete") and response.output_text
    assert 0 < response.usage.output_tokens <= 8 and response.usage.input_tokens > 0
    records = stack.usage_records(before + 1)
    assert len(records) == before + 1
    assert (records[-1].tenant, records[-1].prompt_tokens, records[-1].completion_tokens) == \
        ("alpha", response.usage.input_tokens, response.usage.output_tokens)


def test_streamed_event_sequence(stack):
    before = len(stack.usage_records())
    with stack.openai() as client:
        events = list(client.responses.create(model="auto", input="Count to three.", max_output_tokens=8,
                                              temperature=0, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    completed = events[-1].response
    assert text and completed.output_text == text
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert records_grew_by_one(stack, before, completed.usage)


def records_grew_by_one(stack, before, usage) -> bool:
    records = stack.usage_records(before + 1)
    return len(records) == before + 1 and records[-1].completion_tokens == usage.output_tokens \
        and records[-1].prompt_tokens == usage.input_tokens


def test_previous_response_id_continues_the_conversation(stack):
    with stack.openai() as client:
        first = client.responses.create(model="small", input="My name is Ada Lovelace.", max_output_tokens=6,
                                        temperature=0)
        alone = client.responses.create(model="small", input="What is my name?", max_output_tokens=6,
                                        temperature=0, store=False)
        follow = client.responses.create(model="small", input="What is my name?", max_output_tokens=6,
                                         temperature=0, previous_response_id=first.id)
        streamed = list(client.responses.create(model="small", input="Thanks.", max_output_tokens=4,
                                                temperature=0, previous_response_id=follow.id, stream=True))
    # the stored turns (question and answer) are part of the prompt the worker saw
    assert follow.usage.input_tokens > alone.usage.input_tokens + first.usage.output_tokens
    assert follow.previous_response_id == first.id
    assert streamed[-1].response.usage.input_tokens > follow.usage.input_tokens + follow.usage.output_tokens
    with stack.openai() as client:
        with pytest.raises(openai.NotFoundError):
            client.responses.create(model="small", input="again", previous_response_id=alone.id)  # store=False


def test_tenants_cannot_read_each_others_responses(stack):
    with stack.openai("alpha") as alpha, stack.openai("beta") as beta:
        mine = alpha.responses.create(model="small", input="A secret: 4711.", max_output_tokens=4, temperature=0)
        with pytest.raises(openai.NotFoundError) as err:
            beta.responses.create(model="small", input="What was the secret?", previous_response_id=mine.id)
        assert err.value.body["param"] == "previous_response_id"
        alpha.responses.create(model="small", input="And?", max_output_tokens=4, previous_response_id=mine.id)


def test_unsupported_items_and_tools_are_named(stack):
    with stack.openai() as client:
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model="small", input="x", tools=[{"type": "web_search_preview"}])
        assert err.value.body["param"] == "tools[0].type"
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model="small", input=[{"type": "reasoning", "id": "r1", "summary": []}])
        assert err.value.body["param"] == "input[0].type"
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model="small", input="x", reasoning={"effort": "low"})
        assert err.value.body["param"] == "reasoning"


WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                          "additionalProperties": False}}


def test_function_tool_round_trip(stack):
    with stack.openai() as client:
        first = client.responses.create(model="small", input="What is the weather in Oslo?", tools=[WEATHER],
                                        tool_choice={"type": "function", "name": "get_weather"},
                                        max_output_tokens=40, temperature=0)
        call = next(item for item in first.output if item.type == "function_call")
        assert call.name == "get_weather" and isinstance(json.loads(call.arguments)["city"], str)
        answer = client.responses.create(model="small", previous_response_id=first.id, tools=[WEATHER],
                                         tool_choice="none", max_output_tokens=12, temperature=0,
                                         input=[{"type": "function_call_output", "call_id": call.call_id,
                                                 "output": "5 degrees and rain"}])
    assert answer.output_text and not [i for i in answer.output if i.type == "function_call"]
    assert answer.usage.input_tokens > first.usage.input_tokens  # the call and its output were in the prompt


def test_streamed_function_call(stack):
    with stack.openai() as client:
        events = list(client.responses.create(model="small", input="Weather in Paris?", tools=[WEATHER],
                                              tool_choice="required", max_output_tokens=40, temperature=0,
                                              stream=True))
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.delta" in kinds and "response.function_call_arguments.done" in kinds
    pieces = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert done.arguments == pieces and isinstance(json.loads(pieces)["city"], str)
    call = next(i for i in events[-1].response.output if i.type == "function_call")
    assert call.arguments == pieces and events[-1].response.usage.output_tokens > 0


def test_stored_response_expires_and_is_scoped_to_its_tenant(stack):
    import redis

    from gateway.dropin.response_store import STORE_TTL_S
    from tests.support import SHARED_REDIS

    with stack.openai() as client:
        stored = client.responses.create(model="small", input="Remember 42.", max_output_tokens=4, temperature=0)
    r = redis.Redis.from_url(SHARED_REDIS)
    ttl = r.ttl(f"{stack.prefix}responses:alpha:{stored.id}")
    assert 0 < ttl <= STORE_TTL_S  # kept with an expiry, under the tenant's own key
    assert not r.exists(f"{stack.prefix}responses:beta:{stored.id}")


def test_text_format_json_schema_is_honoured_live(stack):
    schema = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
              "required": ["answer"], "additionalProperties": False}
    with stack.openai() as client:
        response = client.responses.create(
            model="small", input="Is water wet? Answer in JSON.", max_output_tokens=32, temperature=0.7,
            text={"format": {"type": "json_schema", "name": "verdict", "schema": schema, "strict": True}})
    assert response.status == "completed"
    assert json.loads(response.output_text)["answer"] in ("yes", "no")
