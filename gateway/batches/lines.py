"""One batch line through the normal request path (routing, budgets, rate limits, cost), as
the tenant that created the batch, at batch priority, and its line in the output or error file.

Each run of a line has its own request id, the batch id and the line's index and a fresh
suffix (`run_id`): a line run again (a transient failure, a gateway that died mid-answer) is
billed for what that run generated, never dropped as a duplicate of an earlier run's bill."""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Awaitable, Protocol

from aiohttp import web

from wire.errors import OpenAIError

from ..core.context import RequestContext
from ..core.request import Call
from ..core.upstream import ANSWER_TIMEOUT
from .jsonl import ENDPOINTS, BatchLine

log = logging.getLogger(__name__)
BATCH = "batch"
# Answers that say "not now" rather than "not this request": the line is tried again later.
TRANSIENT = (429, 502, 503, 504)


class ServeWith(Protocol):
    """The one request path (handlers.serve), as a batch line goes through it; the app hands it
    to the runner, so the batches package never imports the handlers."""

    def __call__(self, services, call: Call, gate) -> Awaitable[web.StreamResponse]: ...


class Serve(Protocol):
    """ServeWith with the line's services snapshot bound."""

    def __call__(self, call: Call, gate) -> Awaitable[web.StreamResponse]: ...


class TryLater(Exception):
    def __init__(self, after_s: float | None, reason: str):
        super().__init__(reason)
        self.after_s = after_s


@dataclass(frozen=True, slots=True)
class LineResult:
    line: bytes  # the line of the output file (ok) or of the error file
    ok: bool
    input_tokens: int
    output_tokens: int


def _retry_after(headers) -> float | None:
    try:
        return float(headers.get("Retry-After"))
    except (TypeError, ValueError):
        return None


def run_id(batch_id: str, index: int) -> str:
    """The request id of one run of line `index`: derived from the line's, unique to the run."""
    return f"{batch_id}-{index}.{os.urandom(4).hex()}"


def result_line(batch_id: str, index: int, custom_id: str, status: int | None, body: dict | None,
                error: dict | None = None, request_id: str | None = None) -> bytes:
    response = None if status is None else {"status_code": status, "request_id": request_id or f"{batch_id}-{index}",
                                            "body": body}
    line = {"id": f"batch_req_{batch_id.removeprefix('batch_')}_{index}", "custom_id": custom_id,
            "response": response, "error": error}
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False).encode()


def _tokens(body: dict) -> tuple[int, int]:
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return 0, 0
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)


async def run_line(serve: Serve, tenant, batch_id: str, index: int, line: BatchLine, gate) -> LineResult:
    """The line's result; raises TryLater for a rate limit, a spent budget or no worker."""
    ctx = RequestContext(run_id(batch_id, index))
    try:
        answer = await serve(Call(ctx, tenant, ENDPOINTS[line.url], line.body, priority=BATCH), gate)
        status, body = answer.status, json.loads(answer.body)
        if status in TRANSIENT:
            raise TryLater(_retry_after(answer.headers), f"upstream answered {status}")
    except OpenAIError as err:
        if err.status in TRANSIENT and err.code != ANSWER_TIMEOUT:  # a long answer would time out again
            raise TryLater(_retry_after(err.headers), err.message) from None
        status, body = err.status, err.body()
    except TryLater:
        raise
    except Exception:  # a fault of ours on this line: the line fails, the batch goes on
        log.exception("batch %s line %d failed", batch_id, index)
        status, body = 500, OpenAIError(500, f"internal error (request id {ctx.request_id})",
                                        code="internal_error").body()
    tokens_in, tokens_out = _tokens(body) if status == 200 else (0, 0)
    return LineResult(result_line(batch_id, index, line.custom_id, status, body, request_id=ctx.request_id),
                      status == 200,
                      tokens_in, tokens_out)
