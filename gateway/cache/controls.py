"""What a request asks of the response cache, from its body's `cache` object and its headers
(`x-tiergate-cache-mode`, and `Cache-Control` as HTTP means it). Anything else there is a 400
that names it: no control is ever ignored."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from wire.errors import bad_request

MODE_HEADER = "x-tiergate-cache-mode"
MODES = ("exact", "off")
MAX_SECONDS = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Controls:
    mode: str | None = None    # exact: cache this request whatever its sampling; off: never; None: the tenant's rule
    ttl_s: int | None = None   # how long to keep this answer (the tenant's ttl_s when unset)
    no_store: bool = False     # never keep this answer
    no_cache: bool = False     # never serve this request from the cache (a fresh answer may be kept)
    max_age_s: int | None = None  # serve only an answer kept at most this long ago

    @property
    def asks(self) -> bool:
        return self.mode == "exact"


def _seconds(value, param: str, minimum: int) -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= MAX_SECONDS:
        raise bad_request(f"'{param}' must be an integer from {minimum} to {MAX_SECONDS}", param=param,
                          code="invalid_value")
    return value


def _mode(value, param: str) -> str:
    if value not in MODES:
        raise bad_request(f"'{param}' must be one of {', '.join(MODES)}, got {str(value)[:40]!r}", param=param,
                          code="invalid_value")
    return value


NONE_ASKED = Controls()


def from_headers(headers: Mapping[str, str]) -> Controls:
    """The controls an HTTP request's headers state."""
    if MODE_HEADER not in headers and "Cache-Control" not in headers:  # most requests: nothing to parse
        return NONE_ASKED
    controls = NONE_ASKED
    mode = headers.get(MODE_HEADER)
    if mode is not None:
        controls = replace(controls, mode=_mode(mode.strip().lower(), MODE_HEADER))
    directives = headers.get("Cache-Control")
    for directive in (directives or "").split(","):
        name, _, value = directive.strip().lower().partition("=")
        if not name:
            continue
        if name == "no-store" and not value:
            controls = replace(controls, no_store=True)
        elif name == "no-cache" and not value:
            controls = replace(controls, no_cache=True)
        elif name == "no-transform" and not value:
            continue  # honoured as it stands: no intermediary of ours rewrites an answer
        elif name == "max-age":
            controls = replace(controls, max_age_s=_seconds(value.strip('"'), "Cache-Control: max-age", 0))
        else:
            raise bad_request(f"Cache-Control directive {directive.strip()[:40]!r} is not supported (no-store, "
                              "no-cache, max-age=N, no-transform)", param="Cache-Control", code="unsupported_value")
    return controls


_BODY_FLAGS = {"no_store", "no_cache"}


def take_controls(body: dict, given: Controls) -> tuple[Controls, dict]:
    """The body's `cache` object over the headers' controls, and the body without it (the
    workers never see it)."""
    if "cache" not in body:
        return given, body
    asked = body["cache"]
    body = {k: v for k, v in body.items() if k != "cache"}
    if not isinstance(asked, dict):
        raise bad_request("'cache' must be an object, e.g. {\"mode\": \"exact\"}", param="cache")
    controls = given
    for name, value in asked.items():
        param = f"cache.{name}"
        if name == "mode":
            controls = replace(controls, mode=_mode(value, param))
        elif name == "ttl_s":
            controls = replace(controls, ttl_s=_seconds(value, param, 1))
        elif name == "max_age_s":
            controls = replace(controls, max_age_s=_seconds(value, param, 0))
        elif name in _BODY_FLAGS:
            if not isinstance(value, bool):
                raise bad_request(f"'{param}' must be a boolean", param=param)
            controls = replace(controls, **{name: value or getattr(controls, name)})
        else:
            raise bad_request(f"'{param}' is not a cache control (mode, ttl_s, max_age_s, no_store, no_cache)",
                              param=param, code="unsupported_parameter")
    return controls, body
