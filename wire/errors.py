"""OpenAI-style errors: `{"error": {"message", "type", "param", "code"}}` with an HTTP status.
No web framework here: the aiohttp binding (responses, middleware) is webwire.errors."""
from __future__ import annotations

import json

from .unicode import lone_surrogate_path

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
    """Raised anywhere on a request path; webwire's middleware turns it into a response."""

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


def bad_request(message: str, param: str | None = None, code: str | None = "invalid_value") -> OpenAIError:
    return OpenAIError(400, message, param=param, code=code)


def parse_json_object(raw: bytes) -> dict:
    """A request body as a JSON object, or a 400 that says what was wrong with it."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise bad_request("request body is not valid JSON", code="invalid_json") from None
    if not isinstance(body, dict):
        raise bad_request("request body must be a JSON object", code="invalid_json")
    where = lone_surrogate_path(raw, body)
    if where is not None:
        raise bad_request(f"'{where}' holds a lone UTF-16 surrogate, which is not text and cannot be encoded",
                          param=where, code="invalid_text")
    return body
