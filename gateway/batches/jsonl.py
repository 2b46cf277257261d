"""A batch input file: one request per line, checked whole at upload so a bad line is named
before anything runs."""
from __future__ import annotations

import json
from dataclasses import dataclass

from wire.errors import bad_request

ENDPOINTS = {"/v1/chat/completions": "chat", "/v1/completions": "completion", "/v1/embeddings": "embeddings"}
MAX_CUSTOM_ID = 512


@dataclass(frozen=True, slots=True)
class BatchLine:
    custom_id: str
    url: str
    body: dict


def _line_error(number: int, message: str):
    return bad_request(f"line {number} of the file: {message}", param="file", code="invalid_jsonl")


def _read_line(number: int, raw: bytes, max_line_bytes: int) -> BatchLine:
    if len(raw) > max_line_bytes:
        raise _line_error(number, f"is longer than {max_line_bytes} bytes")
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise _line_error(number, "is not valid JSON") from None
    if not isinstance(obj, dict):
        raise _line_error(number, "must be a JSON object")
    unknown = set(obj) - {"custom_id", "method", "url", "body"}
    if unknown:
        raise _line_error(number, f"has unknown field(s) {sorted(unknown)}")
    custom_id, method, url, body = (obj.get(k) for k in ("custom_id", "method", "url", "body"))
    if not isinstance(custom_id, str) or not 0 < len(custom_id) <= MAX_CUSTOM_ID:
        raise _line_error(number, f"'custom_id' must be a string of 1 to {MAX_CUSTOM_ID} characters")
    if method != "POST":
        raise _line_error(number, "'method' must be 'POST'")
    if url not in ENDPOINTS:
        raise _line_error(number, f"'url' must be one of {sorted(ENDPOINTS)}")
    if not isinstance(body, dict):
        raise _line_error(number, "'body' must be a JSON object")
    if body.get("stream"):
        raise _line_error(number, "'stream' is not supported in a batch")
    return BatchLine(custom_id, url, body)


def read_lines(content: bytes, *, max_lines: int, max_line_bytes: int) -> list[BatchLine]:
    """Every request of the file, or a 400 naming the first bad line (numbered from 1)."""
    lines: list[BatchLine] = []
    seen: set[str] = set()
    for number, raw in enumerate(content.split(b"\n"), start=1):
        if not raw.strip():
            continue
        if len(lines) == max_lines:
            raise _line_error(number, f"is past the limit of {max_lines} requests in one file")
        line = _read_line(number, raw, max_line_bytes)
        if line.custom_id in seen:
            raise _line_error(number, f"'custom_id' {line.custom_id!r} is used by an earlier line")
        seen.add(line.custom_id)
        lines.append(line)
    if not lines:
        raise bad_request("the file holds no requests", param="file", code="invalid_jsonl")
    return lines


def check_endpoint(lines: list[BatchLine], endpoint: str) -> None:
    """Every line must call the batch's endpoint (OpenAI's rule: one endpoint per batch)."""
    for number, line in enumerate(lines, start=1):
        if line.url != endpoint:
            raise bad_request(f"request {number} of the input file ('{line.custom_id}') calls {line.url}, "
                              f"not the batch's endpoint {endpoint}", param="input_file_id",
                              code="invalid_jsonl")
