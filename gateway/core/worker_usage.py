"""The count a request is billed when its answer carried no usage: a stream cut before its
usage chunk (the client left, the upstream broke), a whole answer the client cancelled, or a
foreign upstream that never reports usage.

In that order of trust: for a request cut or cancelled, the worker's own count (it aborts the
request if it still runs and says what it generated: `POST /v1/internal/requests/{id}/abort`,
backends/serving/usage_book.py); else the tier's tokenizer on the prompt and the text relayed;
else the prompt's bound (wire/prompt_bound.py) and the chunks relayed. An attempt the gateway gave
up on (`count_abandoned`) is counted the same way, under its own attempt id.
`Usage.source` says which one the usage log records."""
from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

import aiohttp

from .tier_tokenizers import count_tokens
from .usage import Usage

if TYPE_CHECKING:
    from ..config import Tier
    from .pool import Backend
    from .routing import Route
    from .transport import Post

log = logging.getLogger(__name__)


class Ask(Protocol):
    """What counting reads of the request (upstream.Ask has it): its route and the client's body."""
    route: Route
    body: dict


WAIT_S = 2.0  # how long the worker may take to stop the request and count it
ANSWERED_WAIT_S = 0.25  # an attempt its worker answered with an error: its count is (nearly) final


async def count_unreported(post: Post, ask: Ask, attempt_id: str, tier: Tier, sent_to: Backend | None,
                           relayed: list[str], estimated_completion: int) -> Usage:
    """The usage of attempt `attempt_id` that `tier` served (or `sent_to` was working on) whose
    answer carried none. It runs to its end even when the client's task is cancelled meanwhile
    (it is bounded by its own timeouts), like settle."""
    task = asyncio.ensure_future(_count(post, ask, attempt_id, tier, sent_to, relayed, estimated_completion))
    while not task.done():
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            continue  # the handler is cancelled again: the bill still needs this count
        except Exception:  # relay() never raises: a failed count is billed as the estimate
            log.exception("counting the usage of attempt %s failed", attempt_id)
            break
    return _estimate(ask, estimated_completion) if task.cancelled() or task.exception() else task.result()


async def count_abandoned(post: Post, ask: Ask, attempt_id: str, tier: Tier, backend: Backend,
                          timed_out: bool) -> Usage | None:
    """What an attempt the gateway gives up on generated: the worker stops it and counts it. A
    worker that cannot count (a foreign upstream, one gone) is billed the prompt for a timeout
    (it had the request all that time), nothing for an error; None: nothing to bill."""
    counted = await _ask_worker(post, attempt_id, backend, WAIT_S if timed_out else ANSWERED_WAIT_S)
    if counted is not None or not timed_out:
        return counted
    return await count_unreported(post, ask, attempt_id, tier, None, [], 0)


async def _count(post: Post, ask: Ask, attempt_id: str, tier: Tier, sent_to: Backend | None,
                 relayed: list[str], estimated_completion: int) -> Usage:
    if sent_to is not None and (counted := await _ask_worker(post, attempt_id, sent_to, WAIT_S)) is not None:
        return counted
    counted = await count_tokens(tier.tokenizer, ask.body, ask.route.prompt_text, relayed) if tier.tokenizer else None
    if counted is not None:
        return Usage(*counted, source="tokenizer")
    return _estimate(ask, estimated_completion)


def _estimate(ask: Ask, estimated_completion: int) -> Usage:
    """No count from the worker or a tokenizer: the prompt at its bound (what admission reserved:
    never less than the worker rendered), the completion at what was relayed."""
    return Usage(ask.route.prompt_bound, estimated_completion, source="estimate")


async def _ask_worker(post: Post, request_id: str, backend: Backend, wait_s: float) -> Usage | None:
    url = f"{backend.url}/v1/internal/requests/{quote(request_id, safe='')}/abort?wait_s={wait_s:g}"
    response = None
    try:
        response = await post(url, data=b"", headers=backend.auth_headers,
                              timeout=aiohttp.ClientTimeout(total=wait_s + 1.0))
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
