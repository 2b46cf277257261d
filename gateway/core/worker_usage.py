"""The count a request is billed when its answer carried no usage: a stream cut before its
usage chunk (the client left, the upstream broke), a whole answer the client cancelled, or a
foreign upstream that never reports usage.

In that order of trust: for a request cut or cancelled, the worker's own count (it aborts the
request if it still runs and says what it generated: `POST /v1/internal/requests/{id}/abort`,
backends/serving/usage_book.py); else the tier's tokenizer on the prompt and the text relayed;
else the gateway's estimate.
`Usage.source` says which one the usage log records."""
from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING
from urllib.parse import quote

import aiohttp

from .tier_tokenizers import count_tokens
from .usage import Usage

if TYPE_CHECKING:
    from ..config import Tier
    from .pool import Backend
    from .request import GatewayRequest
    from .transport import Post

log = logging.getLogger(__name__)

WAIT_S = 2.0  # how long the worker may take to stop the request and count it
ASK_TIMEOUT = aiohttp.ClientTimeout(total=WAIT_S + 1.0)


async def count_unreported(post: Post, request: GatewayRequest, tier: Tier, sent_to: Backend | None,
                           relayed: list[str], estimated_completion: int) -> Usage:
    """The usage of a request `tier` served (or `sent_to` was working on) whose answer carried
    none. It runs to its end even when the client's task is cancelled meanwhile (it is bounded
    by its own timeouts), like settle."""
    task = asyncio.ensure_future(_count(post, request, tier, sent_to, relayed, estimated_completion))
    while not task.done():
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            continue  # the handler is cancelled again: the bill still needs this count
        except Exception:  # relay() never raises: a failed count is billed as the estimate
            log.exception("counting the usage of request %s failed", request.id)
            break
    return _estimate(request, estimated_completion) if task.cancelled() or task.exception() else task.result()


async def _count(post: Post, request: GatewayRequest, tier: Tier, sent_to: Backend | None,
                 relayed: list[str], estimated_completion: int) -> Usage:
    if sent_to is not None and (counted := await _ask_worker(post, request.id, sent_to)) is not None:
        return counted
    counted = await count_tokens(tier.tokenizer, request.body, request.route.prompt_text, relayed) \
        if tier.tokenizer else None
    if counted is not None:
        return Usage(*counted, source="tokenizer")
    return _estimate(request, estimated_completion)


def _estimate(request: GatewayRequest, estimated_completion: int) -> Usage:
    return Usage(request.route.estimated_prompt_tokens, estimated_completion, source="estimate")


async def _ask_worker(post: Post, request_id: str, backend: Backend) -> Usage | None:
    url = f"{backend.url}/v1/internal/requests/{quote(request_id, safe='')}/abort?wait_s={WAIT_S:g}"
    response = None
    try:
        response = await post(url, data=b"", headers=backend.auth_headers, timeout=ASK_TIMEOUT)
        if response.status != 200:  # a foreign upstream without this endpoint; a request it never saw
            return None
        answer = json.loads(await response.read())
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        log.warning("could not ask %s for the usage of request %s: %s", backend.label, request_id, exc)
        return None
    finally:
        if response is not None:
            response.release()
    counted = answer.get("usage") if isinstance(answer, dict) and answer.get("finished") is True else None
    try:
        prompt, completion = int(counted["prompt_tokens"]), int(counted["completion_tokens"])
    except (TypeError, KeyError, ValueError):  # still running after the wait, or not a count
        return None
    return Usage(prompt, completion, source="worker")
