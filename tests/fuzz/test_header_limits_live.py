"""Requests the HTTP parser refuses (a header line over the limit, too many headers, a request
line over the limit, garbage) get an OpenAI JSON error from a real gateway process, its log
gets one line without a traceback or the offending bytes (an oversized Authorization value
included), and the process keeps serving. Limits: gateway/server/errors.py."""
from __future__ import annotations

import json
import socket
import uuid

from gateway.server.errors import MAX_HEADER_FIELD, MAX_HEADERS, MAX_REQUEST_LINE

from tests.fuzz.fuzz_stack import TENANT_KEY, Response, assert_openai_error

CHAT = {"model": "small", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 3}
HUGE_KEY = "sk-" + uuid.uuid4().hex  # leads an oversized Authorization value: must not reach the log


def _raw(stack, head: bytes) -> Response:
    """One request written byte for byte (http.client would refuse some of these)."""
    with socket.create_connection(("127.0.0.1", stack.port), timeout=10) as sock:
        sock.sendall(head + b"\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head_part, _, body = data.partition(b"\r\n\r\n")
    lines = head_part.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return Response(int(lines[0].split(" ", 2)[1]), headers, body)


def _get(path: str = "/v1/models", *header_lines: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: gateway", f"Authorization: Bearer {TENANT_KEY}", *header_lines]
    return ("\r\n".join(lines) + "\r\n").encode()


def test_oversized_headers_get_a_json_431_and_no_traceback(stack):
    for line in (f"X-Padding: {'a' * 100_000}", f"Authorization: Bearer {HUGE_KEY}{'k' * 100_000}",
                 f"X-Just-Over: {'b' * (MAX_HEADER_FIELD + 1)}"):
        error = assert_openai_error(_raw(stack, _get("/v1/models", line)), 431)
        assert error["code"] == "request_header_too_large" and str(MAX_HEADER_FIELD) in error["message"]
    many = [f"X-H{i}: v" for i in range(MAX_HEADERS + 10)]
    assert "more than" in assert_openai_error(_raw(stack, _get("/v1/models", *many)), 431)["message"]
    assert_openai_error(_raw(stack, _get("/v1/" + "p" * (MAX_REQUEST_LINE + 10))), 414)
    assert assert_openai_error(_raw(stack, b"NOT-HTTP\r\n"), 400)["code"] == "bad_http_request"
    # just under the limit is an ordinary request (room for large bearer tokens)
    fits = _raw(stack, _get("/v1/models", f"X-Big: {'c' * (MAX_HEADER_FIELD - 100)}", "Connection: close"))
    assert fits.status == 200 and json.loads(fits.body)["object"] == "list"

    assert stack.healthy()
    assert stack.post_json("/v1/chat/completions", CHAT).status == 200
    logs = stack.logs()
    assert logs.count("refused a malformed HTTP request") >= 5
    assert "Traceback" not in logs and "Error handling request" not in logs
    assert HUGE_KEY[3:] not in logs and "aaaaaaaaaaaaaaaa" not in logs  # the refused bytes are never logged
