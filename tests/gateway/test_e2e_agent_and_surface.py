"""Through the gateway to a real smollm2-135m worker: a two-tool agent loop with the OpenAI
Agents SDK, n, logprobs in both shapes, and 400s naming unsupported parameters."""
from __future__ import annotations

import json

import openai
import pytest
from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner, StopAtTools, function_tool,
                    set_tracing_disabled)

from tests.gateway.e2e_stack import MODEL


@pytest.fixture(scope="module")
def stack(small_stack):
    return small_stack


@pytest.fixture(scope="module")
def client(stack):
    with openai.OpenAI(base_url=stack.url + "/v1", api_key="local", max_retries=0, timeout=120) as c:
        yield c


async def test_two_tool_agent_loop(stack):
    set_tracing_disabled(True)
    calls: list[tuple[str, str]] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        calls.append(("get_weather", city))
        return f"It is sunny in {city}. Next, call get_time for {city}."

    @function_tool
    def get_time(city: str) -> str:
        """The local time in a city."""
        calls.append(("get_time", city))
        return f"It is 10:15 in {city}."

    async with openai.AsyncOpenAI(base_url=stack.url + "/v1", api_key="local", max_retries=0, timeout=120) as api:
        agent = Agent(name="assistant", instructions="First call get_weather, then call get_time.",
                      tools=[get_weather, get_time], tool_use_behavior=StopAtTools(stop_at_tool_names=["get_time"]),
                      reset_tool_choice=False, model=OpenAIChatCompletionsModel("small", api),
                      model_settings=ModelSettings(tool_choice="required", temperature=0, max_tokens=60))
        result = await Runner.run(agent, "What is the weather and the time in Lisbon?", max_turns=6,
                                  run_config=RunConfig(tracing_disabled=True))
    names = [name for name, _ in calls]
    assert "get_weather" in names and names[-1] == "get_time"  # both tools ran, the loop ended on get_time
    assert result.final_output == f"It is 10:15 in {calls[-1][1]}."


def test_n_choices_and_chat_logprobs(client):
    answer = client.chat.completions.create(model="small", messages=[{"role": "user", "content": "Name a fruit."}],
                                            n=3, max_tokens=8, temperature=0.9, seed=5, logprobs=True, top_logprobs=2)
    assert [c.index for c in answer.choices] == [0, 1, 2]
    assert answer.usage.completion_tokens == sum(len(c.logprobs.content) for c in answer.choices)
    for choice in answer.choices:
        text = "".join(entry.token for entry in choice.logprobs.content)
        assert choice.message.content in text  # special tokens may show in logprobs, never in content
        assert all(len(e.top_logprobs) == 2 and e.logprob <= 0 for e in choice.logprobs.content)


def test_completion_logprobs_shape_and_streamed_choices(client):
    answer = client.completions.create(model="small", prompt="The capital of France is", max_tokens=5,
                                       temperature=0, logprobs=2)
    lp = answer.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 5
    assert "".join(lp.tokens) == answer.choices[0].text and all(len(t) == 2 for t in lp.top_logprobs)
    chunks = list(client.completions.create(model="small", prompt="Once upon a time", max_tokens=6, n=2,
                                            temperature=0.8, seed=1, stream=True))
    assert {c.choices[0].index for c in chunks if c.choices} == {0, 1}


@pytest.mark.parametrize("path, extra", [
    ("chat", {"audio": {"voice": "alloy", "format": "wav"}}), ("chat", {"prediction": {"type": "content", "content": "x"}}),
    ("chat", {"web_search_options": {}}), ("chat", {"modalities": ["text", "audio"]}), ("chat", {"store": True}),
    ("chat", {"reasoning_effort": "low"}), ("completions", {"suffix": "end"}), ("completions", {"echo": True}),
    ("completions", {"best_of": 2}),
])
@pytest.mark.parametrize("target", ["gateway", "worker"])
def test_unsupported_parameters_are_400_naming_them(stack, path, extra, target):
    base, model = (stack.url, "small") if target == "gateway" else (stack.worker_urls[0], MODEL)
    with openai.OpenAI(base_url=base + "/v1", api_key="local", max_retries=0) as c:
        with pytest.raises(openai.BadRequestError) as err:
            if path == "chat":
                c.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=2,
                                          extra_body=extra)
            else:
                c.completions.create(model=model, prompt="hi", max_tokens=2, extra_body=extra)
    assert err.value.body["param"] == next(iter(extra)), json.dumps(err.value.body)
