"""The abort route's answer (webwire/worker_api.py's ABORT_PATH), from a UsageBook: the real worker
and the fake upstream give the gateway the same bill the same way."""
from __future__ import annotations

from aiohttp import web

from wire.errors import OpenAIError, bad_request

from .usage_book import MAX_WAIT_S, UsageBook


async def answer_abort(book: UsageBook, request: web.Request) -> web.Response:
    """Stop the request if it still runs (waiting at most `wait_s` for it to end) and say what it
    generated; 404 for a request that did not run here lately."""
    request_id = request.match_info["request_id"]
    wait = request.query.get("wait_s", "2")
    try:
        wait_s = float(wait)
    except ValueError:
        wait_s = -1.0
    if not 0 <= wait_s <= MAX_WAIT_S:
        raise bad_request(f"'wait_s' must be a number of seconds from 0 to {MAX_WAIT_S:g}", param="wait_s")
    tally = await book.abort(request_id, wait_s)
    if tally is None:
        raise OpenAIError(404, f"no request {request_id!r} ran here in the last {book.ttl_s:g} s",
                          param="request_id", code="not_found")
    prompt, completion = tally.prompt_tokens, tally.completion_tokens
    return web.json_response({"object": "request.usage", "request_id": request_id, "finished": tally.done.is_set(),
                              "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                        "total_tokens": prompt + completion}})
