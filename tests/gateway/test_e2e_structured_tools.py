"""Structured outputs and tool calling end to end: the real openai SDK (and openai-agents)
against a real smollm2-135m worker, directly and through the gateway."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import Optional

import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

from tests.gateway.e2e_stack import MODEL
from tests.gateway.schema_zoo import schemas


class Colour(str, Enum):
    red = "red"
    green = "green"
    blue = "blue"


class Address(BaseModel):
    city: str = Field(max_length=16)
    postcode: Optional[str] = Field(max_length=8)


class Person(BaseModel):
    name: str = Field(max_length=16)
    age: int = Field(ge=0, le=120)
    favourite: Colour
    address: Address
    hobbies: list[str] = Field(max_length=3)
    nickname: Optional[str] = Field(max_length=12)


class GetWeather(BaseModel):
    """Current weather in a city."""
    city: str = Field(max_length=20)
    unit: Optional[str] = Field(default=None, max_length=10)


@pytest.fixture(scope="module")
def stack(small_stack):
    return small_stack


@pytest.fixture(scope="module", params=["gateway", "worker"])
def client(request, stack):
    base = stack.url if request.param == "gateway" else stack.worker_urls[0]
    model = "small" if request.param == "gateway" else MODEL
    with openai.OpenAI(base_url=base + "/v1", api_key="local", max_retries=0, timeout=120) as c:
        c.test_model = model
        yield c


def test_worker_card_shows_capabilities_and_generation_defaults(stack):
    import urllib.request

    with urllib.request.urlopen(stack.worker_urls[0] + "/v1/models") as response:
        card = json.load(response)["data"][0]
    assert card["capabilities"] == {"tools": True, "structured_outputs": True, "logprobs": True, "n": True,
                                    "embeddings": False, "max_context_tokens": 8192, "vocab_size": 49152}
    assert card["generation_defaults"] == {}  # SmolLM2's generation config sets no sampling defaults


def test_parse_with_nested_pydantic_model(client):
    completion = client.chat.completions.parse(
        model=client.test_model, response_format=Person, max_tokens=200, temperature=0,
        messages=[{"role": "user", "content": "Invent a person with an address and hobbies."}])
    person = completion.choices[0].message.parsed
    assert isinstance(person, Person) and isinstance(person.address, Address) and person.favourite in Colour
    assert completion.choices[0].finish_reason == "stop"


def test_json_object_mode_returns_a_json_object(client):
    answer = client.chat.completions.create(
        model=client.test_model, response_format={"type": "json_object"}, max_tokens=60, temperature=0,
        messages=[{"role": "user", "content": "Give a JSON object with keys a and b."}])
    choice = answer.choices[0]
    assert choice.finish_reason in ("stop", "length")
    if choice.finish_reason == "stop":
        assert isinstance(json.loads(choice.message.content), dict)


def test_two_hundred_generations_over_twenty_schemas_all_validate(stack):
    worker = openai.OpenAI(base_url=stack.worker_urls[0] + "/v1", api_key="local", max_retries=0, timeout=300)

    def run(schema: dict) -> list[str]:
        answer = worker.chat.completions.create(
            model=MODEL, n=10, temperature=0.7, max_tokens=120, seed=7,
            response_format={"type": "json_schema", "json_schema": {"name": "record", "strict": True, "schema": schema}},
            messages=[{"role": "user", "content": "Fill in a JSON record with plausible values."}])
        assert all(c.finish_reason == "stop" for c in answer.choices), [c.finish_reason for c in answer.choices]
        return [c.message.content for c in answer.choices]

    zoo = schemas(20)
    with ThreadPoolExecutor(max_workers=len(zoo)) as pool:
        results = list(pool.map(run, zoo))
    count = 0
    for schema, outputs in zip(zoo, results):
        for text in outputs:
            jsonschema.validate(json.loads(text), schema)
            count += 1
    assert count == 200


def test_required_tool_call_whole_and_streamed(client):
    tools = [openai.pydantic_function_tool(GetWeather)]
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    whole = client.chat.completions.create(model=client.test_model, messages=messages, tools=tools,
                                           tool_choice="required", max_tokens=60, temperature=0)
    call = whole.choices[0].message.tool_calls[0]
    assert whole.choices[0].finish_reason == "tool_calls" and call.function.name == "GetWeather"
    GetWeather.model_validate_json(call.function.arguments)
    with client.chat.completions.stream(model=client.test_model, messages=messages, tools=tools,
                                        tool_choice="required", max_tokens=60, temperature=0) as stream:
        final = stream.get_final_completion()  # the SDK reassembles the streamed tool-call deltas
    streamed = final.choices[0].message.tool_calls[0]
    assert final.choices[0].finish_reason == "tool_calls"
    assert isinstance(streamed.function.parsed_arguments, GetWeather)
    assert json.loads(streamed.function.arguments) == json.loads(call.function.arguments)


def test_named_tool_choice_and_a_tool_result_turn(client):
    tools = [openai.pydantic_function_tool(GetWeather),
             {"type": "function", "function": {"name": "get_time", "parameters": {
                 "type": "object", "properties": {"zone": {"type": "string", "maxLength": 20}}, "required": ["zone"]}}}]
    messages = [{"role": "user", "content": "What time is it in Tokyo?"}]
    first = client.chat.completions.create(model=client.test_model, messages=messages, tools=tools, temperature=0,
                                           tool_choice={"type": "function", "function": {"name": "get_time"}},
                                           max_tokens=40)
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "get_time" and "zone" in json.loads(call.function.arguments)
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "It is 09:30 in Tokyo."}]
    second = client.chat.completions.create(model=client.test_model, messages=messages, tools=tools,
                                            tool_choice="none", max_tokens=30, temperature=0)
    assert second.choices[0].message.content and not second.choices[0].message.tool_calls
