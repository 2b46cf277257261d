"""wire/embeddings.py as pure functions: the four input shapes, formats, and named 400s."""
import base64

import numpy as np
import pytest

from wire.embeddings import encode_vector, estimated_tokens, parse_embeddings
from wire.errors import OpenAIError


@pytest.mark.parametrize("value, expected", [
    ("hello", ["hello"]),
    (["a", "b"], ["a", "b"]),
    ([1, 2, 3], [[1, 2, 3]]),
    ([[1, 2], [3]], [[1, 2], [3]]),
])
def test_input_shapes(value, expected):
    req = parse_embeddings({"model": "m", "input": value})
    assert req.inputs == expected and req.encoding_format == "float" and req.dimensions is None


@pytest.mark.parametrize("body, param", [
    ({"model": "m", "input": ""}, "input"),
    ({"model": "m", "input": []}, "input"),
    ({"model": "m", "input": ["ok", 3]}, "input"),
    ({"model": "m", "input": [[1, -2]]}, "input"),
    ({"model": "m", "input": ["x"] * 2049}, "input"),
    ({"model": "m", "input": "x", "encoding_format": "int8"}, "encoding_format"),
    ({"model": "m", "input": "x", "dimensions": 0}, "dimensions"),
    ({"model": "m", "input": "x", "dimensions": True}, "dimensions"),
    ({"model": "", "input": "x"}, "model"),
    ({"model": "m", "input": "x", "truncate": "END"}, "truncate"),
])
def test_rejections_name_the_field(body, param):
    with pytest.raises(OpenAIError) as err:
        parse_embeddings(body)
    assert err.value.status == 400 and err.value.param == param


def test_base64_is_little_endian_float32():
    vector = [0.5, -1.25, 3.0]
    decoded = np.frombuffer(base64.b64decode(encode_vector(vector, "base64")), dtype="<f4")
    assert decoded.tolist() == vector
    assert encode_vector(vector, "float") == vector


def test_estimated_tokens_counts_token_arrays_exactly():
    assert estimated_tokens([[1, 2, 3], [4]]) == 4
    assert estimated_tokens(["abcdefgh"]) == 3
