"""OpenAI errors as aiohttp responses: every failure leaves as `{"error": {...}}`."""
from __future__ import annotations

import json
import logging

from aiohttp import web

from wire.errors import OpenAIError, bad_request, parse_json_object

log = logging.getLogger("wire.errors")  # the logger name operators already filter on


def error_response(err: OpenAIError) -> web.Response:
    return web.json_response(err.body(), status=err.status, headers=err.headers)


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
    except Exception:  # the last line of defence: log it, answer with a plain 500 body
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(OpenAIError(500, "internal server error", type="server_error"))


async def read_json_object(request: web.Request) -> dict:
    """The request body as a JSON object, or a 400 that says what was wrong with it."""
    return parse_json_object(await request.read())
