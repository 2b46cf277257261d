"""The shared boundary (wire/) refuses by name what an engine would choke on: every parameter at
its limit passes and one past it is a 400 naming it; lone surrogates, deep or huge schemas and
token ids past a vocabulary likewise. Pure: no server, so Hypothesis can try many inputs."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wire.errors import OpenAIError, parse_json_object
from wire.requests import MAX_INT, MAX_STOP_TOKEN_IDS, SEED_RANGE, parse_chat, parse_completion
from wire.sampling import MAX_LOGIT_BIAS, MAX_N, MAX_TOP_LOGPROBS
from wire.schema_limits import MAX_DEPTH, MAX_ENUM_VALUES, MAX_NODES, MAX_PATTERN_CHARS
from wire.token_ids import check_token_ids

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
SCHEMA_PARAM = "response_format.json_schema.schema"


def _refusal(body: dict, parse=parse_chat) -> OpenAIError:
    with pytest.raises(OpenAIError) as err:
        parse(body)
    assert err.value.status == 400
    return err.value


def _with_schema(schema) -> dict:
    return {**CHAT, "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}


# (parameter, largest accepted, smallest refused above it); chat unless the name says otherwise
LIMITS = [
    ("seed", SEED_RANGE[1], SEED_RANGE[1] + 1), ("max_tokens", MAX_INT, MAX_INT + 1),
    ("max_completion_tokens", MAX_INT, MAX_INT + 1), ("top_k", MAX_INT, MAX_INT + 1), ("n", MAX_N, MAX_N + 1),
    ("temperature", 2.0, 2.0000001), ("top_p", 1.0, 1.0000001), ("presence_penalty", 2.0, 2.01),
    ("frequency_penalty", 2.0, 2.01), ("repetition_penalty", 10.0, 10.01),
]


@pytest.mark.parametrize("name, at, past", LIMITS)
def test_every_parameter_at_its_limit_passes_and_one_past_is_refused_by_name(name, at, past):
    parse_chat({**CHAT, name: at})
    assert _refusal({**CHAT, name: past}).param == name


def test_limits_below_and_of_lists():
    assert _refusal({**CHAT, "seed": SEED_RANGE[0] - 1}).param == "seed"
    parse_chat({**CHAT, "seed": SEED_RANGE[0]})
    assert _refusal({**CHAT, "top_logprobs": MAX_TOP_LOGPROBS + 1, "logprobs": True}).param == "top_logprobs"
    parse_chat({**CHAT, "stop_token_ids": list(range(MAX_STOP_TOKEN_IDS))})
    assert _refusal({**CHAT, "stop_token_ids": list(range(MAX_STOP_TOKEN_IDS + 1))}).param == "stop_token_ids"
    parse_chat({**CHAT, "logit_bias": {str(i): 1 for i in range(MAX_LOGIT_BIAS)}})
    assert _refusal({**CHAT, "logit_bias": {str(i): 1 for i in range(MAX_LOGIT_BIAS + 1)}}).param == "logit_bias"
    assert _refusal({"model": "m", "prompt": [1, MAX_INT + 1]}, parse_completion).param == "prompt"


@given(st.integers(min_value=-2**200, max_value=2**200) | st.floats(allow_nan=True, allow_infinity=True))
@settings(max_examples=200, deadline=None)
def test_any_seed_is_taken_whole_or_refused_by_name(seed):
    try:
        params = parse_chat({**CHAT, "seed": seed}).params
    except OpenAIError as err:
        assert err.status == 400 and err.param == "seed"
        return
    assert SEED_RANGE[0] <= params.seed <= SEED_RANGE[1] and params.seed == seed


@given(st.sampled_from(["max_tokens", "top_k", "n", "temperature", "top_p", "presence_penalty"]),
       st.one_of(st.integers(min_value=-2**70, max_value=2**70), st.floats(), st.just(-0.0)))
@settings(max_examples=200, deadline=None)
def test_numbers_anywhere_on_the_line_are_taken_or_refused_by_name(name, value):
    try:
        parse_chat({**CHAT, name: value})
    except OpenAIError as err:
        assert err.status == 400 and err.param == name


def test_a_lone_surrogate_is_refused_naming_where_it_is_and_a_pair_is_text():
    raw = b'{"model":"m","messages":[{"role":"user","content":"ok"},{"role":"user","content":"a\\udc00"}]}'
    with pytest.raises(OpenAIError) as err:
        parse_json_object(raw)
    assert err.value.status == 400 and err.value.param == "messages[1].content"
    assert parse_json_object(b'{"content":"\\ud83d\\ude00"}') == {"content": "\U0001F600"}
    with pytest.raises(OpenAIError) as err:
        parse_json_object(b'{"k\\ud800":1}')
    assert err.value.param == "k\\ud800"  # the path itself stays encodable


@given(st.text(alphabet=st.characters(codec=None), max_size=20))
@settings(max_examples=200, deadline=None)
def test_any_string_parses_to_itself_or_is_refused_as_a_lone_surrogate(text):
    raw = json.dumps({"content": text}).encode()  # ensure_ascii: non-ASCII as \\u escapes
    try:
        assert parse_json_object(raw) == {"content": text}
        text.encode("utf-8")
    except OpenAIError as err:
        assert err.param == "content" and any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def _nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_schema_depth_size_enum_and_pattern_limits_are_named():
    parse_chat(_with_schema(_nested(MAX_DEPTH // 2 - 1)))
    for schema in (_nested(300), _nested(5000)):  # past the recursion limit: still a clean 400
        err = _refusal(_with_schema(schema))
        assert err.param == SCHEMA_PARAM and err.code == "schema_too_complex" and str(MAX_DEPTH) in err.message
    wide = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(MAX_NODES)}}
    assert str(MAX_NODES) in _refusal(_with_schema(wide)).message
    parse_chat(_with_schema({"enum": list(range(MAX_ENUM_VALUES))}))
    assert "enum" in _refusal(_with_schema({"enum": list(range(MAX_ENUM_VALUES + 1))})).message
    parse_chat(_with_schema({"type": "string", "pattern": "a" * MAX_PATTERN_CHARS}))
    assert "pattern" in _refusal(_with_schema({"type": "string", "pattern": "a" * (MAX_PATTERN_CHARS + 1)})).message
    tool = {"type": "function", "function": {"name": "f", "parameters": _nested(400)}}
    assert _refusal({**CHAT, "tools": [tool]}).param == "tools[0].function.parameters"


def test_token_ids_must_be_inside_the_vocabulary():
    params = parse_chat({**CHAT, "logit_bias": {"99": 1}, "stop_token_ids": [5]}).params
    check_token_ids(params, 100)
    with pytest.raises(OpenAIError) as err:
        check_token_ids(params, 99, where="tier 'small'")
    assert err.value.param == "logit_bias" and "tier 'small'" in err.value.message
    with pytest.raises(OpenAIError) as err:
        check_token_ids(parse_completion({"model": "m", "prompt": [1, 2, 700]}).params, 500, [1, 2, 700])
    assert err.value.param == "prompt"
