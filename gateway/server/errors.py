"""OpenAI-style answers for requests aiohttp's HTTP parser rejects before any app code runs.

An oversized header line, too many headers or a malformed request line never reach the
middlewares: aiohttp answers from RequestHandler.handle_error with a plain-text 400 and logs a
traceback whose message quotes the first 100 bytes of the offending line (an Authorization
value included). aiohttp has no public hook for this (aio-libs/aiohttp#3287), so the runner
below installs a RequestHandler subclass through BaseRunner._make_server, the runners'
override point. Parser rejections then get a JSON error body and one log line that names the
error's class only, never its text.
"""
from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMethod, BadHttpMessage, HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

from webwire.errors import error_response
from wire.errors import OpenAIError

log = logging.getLogger("gateway.http")

# The request line (method, path, query) and each header line; distinct so a LineTooLong says
# which one overflowed. Headers get room for large bearer tokens (JWTs); more is refused.
MAX_REQUEST_LINE = 8190
MAX_HEADER_FIELD = 16380
MAX_HEADERS = 128
PARSER_LIMITS = {"max_line_size": MAX_REQUEST_LINE, "max_field_size": MAX_HEADER_FIELD, "max_headers": MAX_HEADERS}


def parser_error(exc: BaseException | None) -> OpenAIError:
    """The client-facing error for a parser rejection; generic text (never the raw bytes)."""
    if isinstance(exc, LineTooLong):
        if exc.args[1:2] == (MAX_REQUEST_LINE,):
            return OpenAIError(414, f"the request line is longer than {MAX_REQUEST_LINE} bytes",
                               code="request_line_too_long")
        return OpenAIError(431, f"a request header is longer than {MAX_HEADER_FIELD} bytes",
                           code="request_header_too_large")
    if isinstance(exc, BadHttpMessage) and "Too many headers" in str(exc):
        return OpenAIError(431, f"the request has more than {MAX_HEADERS} headers", code="request_header_too_large")
    return OpenAIError(400, "malformed HTTP request", code="bad_http_request")


class JsonErrorHandler(RequestHandler):
    __slots__ = ()

    def handle_error(self, request, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if isinstance(exc, HttpProcessingError) and status < 500:
            error = parser_error(exc)
            level = logging.DEBUG if isinstance(exc, BadHttpMethod) else logging.WARNING  # port scanners, TLS probes
            log.log(level, "refused a malformed HTTP request from %s: %s -> %d", request.remote,
                    type(exc).__name__, error.status)
        else:  # escaped every middleware: a gateway bug, so its traceback belongs in the log
            self.log_exception("Error handling request from %s", request.remote, exc_info=exc)
            error = OpenAIError(status, "internal server error" if status == 500 else f"request failed ({status})")
        if request.writer.output_size > 0:
            raise ConnectionError("response already started; cannot send the error")
        out = error_response(error)
        out.force_close()
        return out


class _JsonErrorServer(web.Server):
    handler_class = JsonErrorHandler  # read_timeouts.py's subclass when the runner sets deadlines

    def __call__(self) -> RequestHandler:
        handler = super().__call__()
        handler.__class__ = self.handler_class  # same slots; only behaviour differs
        return handler


class GatewayRunner(web.AppRunner):
    """web.AppRunner whose connections answer parser-level rejections as OpenAI JSON errors."""

    __slots__ = ("_handler_class", "_header_timeout_s")

    def __init__(self, app: web.Application, handler_class: type[JsonErrorHandler] = JsonErrorHandler,
                 header_timeout_s: float = 0.0, **kwargs):
        """`handler_class`, `header_timeout_s`: read_timeouts.py's header deadline, when set."""
        super().__init__(app, **{**PARSER_LIMITS, **kwargs})
        self._handler_class, self._header_timeout_s = handler_class, header_timeout_s

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _JsonErrorServer
        server.handler_class, server.header_timeout_s, server.header_timers = \
            self._handler_class, self._header_timeout_s, {}
        return server
