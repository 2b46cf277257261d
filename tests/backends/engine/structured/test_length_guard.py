"""Length-aware constrained decoding in the real engine (SmolLM2): when max_tokens would cut a
JSON answer or a tool call, the engine forces the shortest valid ending, so the output parses
and validates, and finish_reason says "length"; a format that cannot fit at all is refused."""
from __future__ import annotations

import json

import jsonschema
import pytest

from backends.engine.config import EngineConfig
from backends.engine.structured.length_guard import FormatNeedsMoreTokens
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.core.sequence import SamplingParams
from backends.serving.tool_grammar import CALL_CLOSE, CALL_OPEN, output_grammar, output_shape
from wire.requests import parse_chat

pytestmark = pytest.mark.slow  # the bundled models generate under each guard

PERSON = {"type": "object", "required": ["name", "age", "tags", "home"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                         "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                         "home": {"type": "object", "required": ["city", "country"],
                                  "properties": {"city": {"type": "string"}, "country": {"type": "string"}}}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "required": ["city", "days"],
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}}}}


@pytest.fixture(scope="module")
def engine():
    return LLMEngine(EngineConfig(model="smollm2-135m", num_blocks=512, block_size=16))


def _prompt(engine, text):
    return engine.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                tokenize=True, return_dict=False)


def _params(body: dict, max_tokens: int, seed: int, close: bool = True) -> SamplingParams:
    parsed = parse_chat({"model": "m", "messages": [{"role": "user", "content": "x"}], **body}).params
    return SamplingParams(max_tokens=max_tokens, temperature=0.9, seed=seed, grammar=output_grammar(parsed),
                          shape=output_shape(parsed), close_in_budget=close)


def _run(engine, text: str, params: list[SamplingParams]):
    seqs = [engine.add_request(_prompt(engine, text), p) for p in params]
    while engine.has_work():
        engine.step()
    return [(engine.tokenizer.decode(s.output_ids, skip_special_tokens=True), s) for s in seqs]


def test_a_cut_json_schema_answer_is_closed_and_validates(engine):
    fmt = {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}}
    outs = _run(engine, "Describe a person as JSON, with a long biography in the name.",
                [_params(fmt, 28, seed) for seed in range(6)] + [_params(fmt, 28, 0, close=False)])
    for text, seq in outs[:-1]:
        jsonschema.validate(json.loads(text), PERSON)
        assert seq.finish_reason == "length" and seq.num_output_tokens <= 28
    assert outs[0][1].guard.closed and not outs[0][1].guard.off
    unguarded, seq = outs[-1]
    assert seq.finish_reason == "length"
    with pytest.raises(ValueError):  # the same budget without the guard is cut mid-answer
        json.loads(unguarded)


def test_json_object_at_high_temperature_always_parses(engine):
    outs = _run(engine, "Return a JSON object with keys 'fruit' and 'count' describing a basket",
                [_params({"response_format": {"type": "json_object"}}, 20, seed) for seed in range(8)])
    for text, _ in outs:
        assert isinstance(json.loads(text), dict)


def test_tool_call_arguments_are_closed_inside_the_call(engine):
    body = {"tools": [WEATHER], "tool_choice": "required", "parallel_tool_calls": False}
    outs = _run(engine, "What is the weather in Llanfairpwllgwyngyll for the next days?",
                [_params(body, 34, seed) for seed in range(4)])
    for text, seq in outs:
        assert text.startswith(CALL_OPEN) and text.endswith(CALL_CLOSE), text
        call = json.loads(text[len(CALL_OPEN):-len(CALL_CLOSE)])
        assert call["name"] == "get_weather"
        jsonschema.validate(call["arguments"], WEATHER["function"]["parameters"])


def test_a_format_longer_than_max_tokens_is_refused_with_the_tokens_it_needs(engine):
    fmt = {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}}
    with pytest.raises(FormatNeedsMoreTokens) as err:
        engine.add_request(_prompt(engine, "x"), _params(fmt, 5, 0))
    assert err.value.needed > 5
    engine.add_request(_prompt(engine, "x"), _params(fmt, err.value.needed, 0))  # exactly enough is fine
    while engine.has_work():
        engine.step()


def test_logprobs_describe_the_forced_tokens_too(engine):
    fmt = {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}}
    params = _params(fmt, 28, 3)
    params.logprobs = 2
    (text, seq), = _run(engine, "Describe a person as JSON, with a long biography in the name.", [params])
    assert seq.guard.closed and json.loads(text)
    assert [token for token, _, _ in seq.logprobs] == seq.output_ids
    assert all(logprob <= 0.0 for _, logprob, _ in seq.logprobs)
