"""OpenAI-style errors: `{"error": {"message", "type", "param", "code"}}` with an HTTP status."""
from __future__ import annotations

import json
import logging

from aiohttp import web

log = logging.getLogger(__name__)

_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable_error",
}


class OpenAIError(Exception):
    """Raised anywhere on a request path; the middleware turns it into a response."""

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str | None = None, type: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type or _TYPE_BY_STATUS.get(status, "server_error" if status >= 500 else "invalid_request_error")
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> web.Response:
        return web.json_response(self.body(), status=self.status, headers=self.headers)


def bad_request(message: str, param: str | None = None, code: str | None = "invalid_value") -> OpenAIError:
    return OpenAIError(400, message, param=param, code=code)


@web.middleware
async def error_middleware(request: web.Request, handler):
    """Every failure leaves as an OpenAI error body; never an HTML page or a traceback."""
    try:
        return await handler(request)
    except OpenAIError as err:
        return err.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = "not_found" if exc.status == 404 else None
        message = exc.reason if exc.status != 413 else "request body too large"
        return OpenAIError(exc.status, message, code=code).response()
    except json.JSONDecodeError:
        return bad_request("request body is not valid JSON", code="invalid_json").response()
    except Exception:  # the last line of defence: log it, answer with a plain 500 body
        log.exception("unhandled error on %s %s", request.method, request.path)
        return OpenAIError(500, "internal server error", type="server_error").response()


async def read_json_object(request: web.Request) -> dict:
    """The request body as a JSON object, or a 400 that says what was wrong with it."""
    raw = await request.read()
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise bad_request("request body is not valid JSON", code="invalid_json") from None
    if not isinstance(body, dict):
        raise bad_request("request body must be a JSON object", code="invalid_json")
    return body
