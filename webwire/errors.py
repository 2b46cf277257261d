"""OpenAI errors as aiohttp responses: every failure leaves as `{"error": {...}}`."""
from __future__ import annotations

import json
import logging
import os
import re

from aiohttp import web

from wire.errors import OpenAIError, bad_request, parse_json_object

log = logging.getLogger("wire.errors")  # the logger name operators already filter on

# The request's id, set by whoever assigns one (the gateway's context, which always makes its
# own); else (a worker behind the gateway) the caller's x-request-id when it looks like one, else
# a new one. 500s carry it in the body and the log, next to the client's own id when it sent one.
REQUEST_ID = web.RequestKey("tiergate_request_id", str)
CLIENT_ID = web.RequestKey("tiergate_client_request_id", str)
CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")  # a client's request id we echo as it is

# Exceptions that only a request's content raises on our paths (text no encoder takes, nesting
# past the recursion limit, a number past a C type): a 400, though nothing checked it earlier.
_INPUT_FAULTS = {
    UnicodeError: "the request holds text that cannot be encoded",
    RecursionError: "the request nests too deeply",
    OverflowError: "a number in the request is out of range",
}


def error_response(err: OpenAIError) -> web.Response:
    return web.json_response(err.body(), status=err.status, headers=err.headers)


def new_request_id() -> str:
    return "req-" + os.urandom(12).hex()


def bounded_client_id(given: str | None) -> str | None:
    """A client's request id when it looks like one (only ever echoed and logged), else None."""
    return given if given and CLIENT_REQUEST_ID.match(given) else None


def request_id_from(given: str | None) -> str:
    """The caller's x-request-id when it looks like one, else a new id (workers: the caller is the gateway)."""
    return bounded_client_id(given) or new_request_id()


def _client_note(request: web.Request) -> str:
    client_id = request.get(CLIENT_ID)
    return f", client request id {client_id}" if client_id else ""


def request_id(request: web.Request) -> str:
    if not request.get(REQUEST_ID):
        request[REQUEST_ID] = request_id_from(request.headers.get("x-request-id"))
    return request[REQUEST_ID]


@web.middleware
async def error_middleware(request: web.Request, handler):
    """Every failure leaves as an OpenAI error body; never an HTML page or a traceback."""
    try:
        return await handler(request)
    except OpenAIError as err:
        return error_response(err)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = "not_found" if exc.status == 404 else None
        message = exc.reason if exc.status != 413 else "request body too large"
        return error_response(OpenAIError(exc.status, message, code=code))
    except json.JSONDecodeError:
        return error_response(bad_request("request body is not valid JSON", code="invalid_json"))
    except tuple(_INPUT_FAULTS) as exc:
        rid = request_id(request)
        message = next(text for kind, text in _INPUT_FAULTS.items() if isinstance(exc, kind))
        log.warning("request %s%s on %s %s refused: %s: %s", rid, _client_note(request), request.method,
                    request.path, type(exc).__name__, exc)
        return error_response(bad_request(f"{message} (request id {rid})", code="invalid_request"))
    except Exception:  # a server fault: log it with the request id, answer a plain 500 body
        rid = request_id(request)
        log.exception("unhandled error on %s %s (request id %s%s)", request.method, request.path, rid,
                      _client_note(request))
        return error_response(OpenAIError(500, f"internal server error (request id {rid})", type="server_error",
                                          code="internal_error", headers={"x-request-id": rid}))


async def read_json_object(request: web.Request) -> dict:
    """The request body as a JSON object, or a 400 that says what was wrong with it."""
    return parse_json_object(await request.read())
