"""Validation of OpenAI embeddings request bodies, and the base64 vector encoding.

`input` is a string, a list of strings, a list of token ids, or a list of token-id lists
(OpenAI's four shapes). Every rejection is an OpenAIError(400) naming the field.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass

import numpy as np

from .errors import bad_request

MAX_INPUTS = 2048  # OpenAI's own per-request limit
ENCODINGS = ("float", "base64")
KNOWN_FIELDS = {"model", "input", "encoding_format", "dimensions", "user"}


@dataclass
class EmbeddingsRequest:
    model: str
    inputs: list  # each a non-empty str or a non-empty list[int]
    encoding_format: str
    dimensions: int | None
    raw: dict


def _is_token(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _inputs(value) -> list:
    if isinstance(value, str):
        value = [value]
    elif isinstance(value, list) and value and all(_is_token(t) for t in value):
        value = [value]  # one token array
    if not isinstance(value, list) or not value:
        raise bad_request("'input' must be a non-empty string, list of strings, or token array(s)", param="input")
    if len(value) > MAX_INPUTS:
        raise bad_request(f"'input' may hold at most {MAX_INPUTS} items", param="input")
    for i, item in enumerate(value):
        if isinstance(item, str):
            if not item:
                raise bad_request(f"input[{i}] is an empty string", param="input")
        elif not (isinstance(item, list) and item and all(_is_token(t) for t in item)):
            raise bad_request(f"input[{i}] must be a non-empty string or a non-empty list of token ids",
                              param="input")
    return value


def parse_embeddings(body: dict) -> EmbeddingsRequest:
    unknown = sorted(set(body) - KNOWN_FIELDS)
    if unknown:  # never drop a parameter silently
        raise bad_request(f"'{unknown[0]}' is not supported on /v1/embeddings", param=unknown[0],
                          code="unsupported_parameter")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_request("'model' is required and must be a non-empty string", param="model")
    fmt = body.get("encoding_format") or "float"
    if fmt not in ENCODINGS:
        raise bad_request(f"'encoding_format' must be one of {list(ENCODINGS)}", param="encoding_format")
    dims = body.get("dimensions")
    if dims is not None and not (_is_token(dims) and dims >= 1):
        raise bad_request("'dimensions' must be a positive integer", param="dimensions")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise bad_request("'user' must be a string", param="user")
    return EmbeddingsRequest(model=model, inputs=_inputs(body.get("input")), encoding_format=fmt,
                             dimensions=dims, raw=body)


def estimated_tokens(inputs: list) -> int:
    """A cheap estimate for admission, before any tokenizer has seen the text."""
    return sum(len(x) if isinstance(x, list) else len(x) // 4 + 1 for x in inputs)


def encode_vector(vector, encoding_format: str):
    """A list of floats, or base64 of little-endian float32 (what the openai SDK decodes)."""
    array = np.asarray(vector, dtype="<f4")
    if encoding_format == "base64":
        return base64.b64encode(array.tobytes()).decode("ascii")
    return array.tolist()
