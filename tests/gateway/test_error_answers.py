"""webwire's error middleware, which gateway and workers share: exceptions only request content
raises answer 400, anything else is a 500 that names a request id in its body, header and log."""
from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from webwire.errors import CLIENT_ID, REQUEST_ID, error_middleware


def _raising(exc: BaseException):
    async def handler(request):
        raise exc
    return handler


async def _answer(exc: BaseException, headers: dict | None = None):
    app = web.Application(middlewares=[error_middleware])
    app.router.add_post("/", _raising(exc))
    async with TestClient(TestServer(app)) as client:
        response = await client.post("/", data=b"{}", headers=headers or {})
        return response.status, response.headers.copy(), await response.json()


async def test_input_caused_exceptions_are_400s():
    for exc in (RecursionError("maximum recursion depth exceeded"), OverflowError("int too large"),
                UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")):
        status, _, body = await _answer(exc)
        assert status == 400 and body["error"]["type"] == "invalid_request_error", (exc, body)
        assert "request id" in body["error"]["message"]


async def test_a_server_fault_is_a_500_naming_the_request_id(caplog):
    caplog.set_level(logging.ERROR, logger="wire.errors")
    status, headers, body = await _answer(KeyError("bug"), {"x-request-id": "abc-123"})
    assert status == 500 and body["error"]["code"] == "internal_error"
    assert "abc-123" in body["error"]["message"] and headers["x-request-id"] == "abc-123"
    assert "abc-123" in caplog.text and "KeyError" in caplog.text
    status, headers, body = await _answer(KeyError("bug"), {"x-request-id": "bad id with spaces"})
    assert headers["x-request-id"].startswith("req-") and headers["x-request-id"] in body["error"]["message"]


async def test_the_500_log_line_names_the_clients_request_id_next_to_ours(caplog):
    """The gateway sets its own id and the client's; the log line carries both, the answer ours."""
    caplog.set_level(logging.ERROR, logger="wire.errors")

    @web.middleware
    async def gateway_ids(request, handler):
        request[REQUEST_ID], request[CLIENT_ID] = "req-ours", "client-7"
        return await handler(request)
    app = web.Application(middlewares=[gateway_ids, error_middleware])
    app.router.add_post("/", _raising(KeyError("bug")))
    async with TestClient(TestServer(app)) as client:
        response = await client.post("/", data=b"{}", headers={"x-request-id": "client-7"})
        assert response.status == 500 and response.headers["x-request-id"] == "req-ours"
    assert "req-ours" in caplog.text and "client request id client-7" in caplog.text
