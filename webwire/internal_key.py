"""The credential between the gateway and its workers. Every worker route but /health wants
`Authorization: Bearer <key>`; the key comes from the environment (a Kubernetes Secret; `make
run` generates one) and is compared in constant time. A worker on a reachable address without a
key would serve anyone for free, so it refuses to start."""
from __future__ import annotations

import hmac
import os
import secrets

from aiohttp import web

from wire.errors import OpenAIError

from .loopback import is_loopback

WORKER_KEY_ENV = "TIERGATE_WORKER_KEY"  # the gateway sends it as the tier's upstream key (api_key_env)
OPEN_PATHS = frozenset({"/health"})  # liveness probes carry no credential


def key_from_env(env=os.environ) -> str | None:
    return env.get(WORKER_KEY_ENV, "").strip() or None


def generated_key() -> str:
    return secrets.token_urlsafe(32)


def bind_refusal(host: str, key: str | None) -> str | None:
    """The one line a worker exits with, or None when it may listen on `host`."""
    if key is not None or is_loopback(host):
        return None
    return (f"refusing to listen on {host or 'every address'} without {WORKER_KEY_ENV}: every route would be "
            f"open to anyone who reaches it (free generations, any priority). Set {WORKER_KEY_ENV} to the key "
            f"the gateway sends (its tier's api_key_env), or listen on 127.0.0.1")


def require_key(key: str):
    """aiohttp middleware: 401 for any path but /health without the key (inside error_middleware)."""
    expected = f"Bearer {key}".encode()

    @web.middleware
    async def check_key(request: web.Request, handler):
        given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
        if request.path not in OPEN_PATHS and not hmac.compare_digest(given, expected):
            raise OpenAIError(401, "missing or wrong internal credential: this worker answers only its gateway",
                              code="invalid_api_key")
        return await handler(request)

    return check_key


def key_middlewares(key: str | None) -> list:
    """The middlewares a worker app adds after error_middleware: none without a key (loopback only)."""
    return [require_key(key)] if key is not None else []
