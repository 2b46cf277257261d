"""The shortest closing of a partial JSON answer (backends/engine/structured/json_shape.py, output_shape.py):
after every prefix of a valid document, prefix + closing parses and validates against the
schema, and the closing is empty exactly when the document is complete."""
from __future__ import annotations

import json

import jsonschema
import pytest

from backends.engine.structured.grammar import closed_objects
from backends.engine.structured.json_shape import JsonShape
from backends.engine.structured.output_shape import OutputReader, OutputShape

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is a test dependency (docs/gpu.md lists the wheels)")
st = pytest.importorskip("hypothesis.strategies")
given, settings = hypothesis.given, hypothesis.settings

PERSON = closed_objects({
    "type": "object", "required": ["name", "age", "tags", "home"],
    "properties": {"name": {"type": "string", "minLength": 2}, "age": {"type": "integer", "minimum": 18},
                   "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                   "mood": {"enum": ["calm", "cross"]},
                   "home": {"$ref": "#/$defs/place"}},
    "$defs": {"place": {"type": "object", "required": ["city", "country"],
                        "properties": {"city": {"type": "string"}, "country": {"enum": ["France", "Fiji"]},
                                       "zip": {"type": ["integer", "null"]}}}}})
DOCS = [
    {"name": 'Al "the great" \\ Li\n', "age": 31, "tags": ["a", "b\u00e9\U0001F600"], "mood": "cross",
     "home": {"city": "Paris", "country": "France", "zip": None}},
    {"name": "Bo", "age": 18, "tags": ["x", "y", "z"], "home": {"city": "", "country": "Fiji"}},
]
NUMBERS = {"type": "object", "properties": {"x": {"type": "number", "exclusiveMinimum": 2.5},
                                            "v": {"type": "array", "items": {"type": "number"}}}}


def _every_prefix_closes(schema: dict, doc) -> None:
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
    for cut in range(len(text) + 1):
        shape = JsonShape(schema)
        shape.feed(text[:cut])
        closing = shape.closing()
        assert closing is not None, text[:cut]
        finished = text[:cut] + closing
        try:
            jsonschema.validate(json.loads(finished), schema)
        except (ValueError, jsonschema.ValidationError) as exc:
            pytest.fail(f"{text[:cut]!r} + {closing!r}: {exc}")
        assert closing or cut == len(text) or _is_number_prefix(text[:cut])


def _is_number_prefix(text: bytes) -> bool:
    try:  # a top-level number may be complete before its last digit is written
        return isinstance(json.loads(text), (int, float))
    except ValueError:
        return False


@pytest.mark.parametrize("doc", DOCS)
def test_nested_objects_arrays_escapes_and_required_properties_close_from_every_prefix(doc):
    _every_prefix_closes(PERSON, doc)


def test_numbers_literals_and_free_objects_close_from_every_prefix():
    _every_prefix_closes(NUMBERS, {"x": 1250.5, "v": [1, -0.25, 3e-2, -7e+30]})
    _every_prefix_closes({"type": "object"}, {"fruit": "apple", "n": [True, False, None, {"k": {}}], "": 1})


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                           | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3), max_leaves=12)


@pytest.mark.slow
@given(st.dictionaries(st.text(max_size=6), json_values, max_size=4))
@settings(max_examples=60, deadline=None)
def test_any_json_object_closes_from_every_prefix(doc):
    _every_prefix_closes({"type": "object"}, doc)


def test_the_shortest_document_supplies_required_values_only():
    assert JsonShape(PERSON).closing() == b'{"name":"aa","age":18,"tags":["",""],"home":{"city":"","country":"Fiji"}}'
    assert JsonShape({"type": "string", "pattern": "^a+$"}).closing() is None  # patterns: not ours to guess


def test_tool_calls_close_inside_the_tag_the_arguments_and_after():
    call = {"type": "object", "required": ["name", "arguments"], "additionalProperties": False,
            "properties": {"name": {"const": "get_weather"},
                           "arguments": {"type": "object", "required": ["city"], "additionalProperties": False,
                                         "properties": {"city": {"type": "string"}}}}}
    written = '<tool_call>{"name":"get_weather","arguments":{"city":"Oslo"}}</tool_call>'
    for shape in (OutputShape(call=call, calls_only=True), OutputShape(answer={"type": "object"}, call=call)):
        for cut in range(1, len(written) + 1):
            reader = OutputReader(shape)
            reader.feed(written[:cut].encode())
            finished = written[:cut] + reader.closing().decode()
            body = finished.removeprefix("<tool_call>").removesuffix("</tool_call>")
            assert finished.startswith("<tool_call>") and finished.endswith("</tool_call>"), finished
            assert json.loads(body)["name"] == "get_weather" and "city" in json.loads(body)["arguments"]
    answer = OutputReader(OutputShape(answer={"type": "object"}, call=call))
    answer.feed(b'{"a":[')
    assert answer.closing() == b"]}"
