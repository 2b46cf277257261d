"""An answer served from the response cache, as the `Outcome` the rest of the path reads: the
tier it came from, no worker, the usage it had (marked `cache`, or `semantic_cache` for an answer
to a similar prompt) and `cache` = hit or semantic."""
from __future__ import annotations

from ..core.context import CACHE
from ..core.relay import Delivery, Outcome
from ..core.request import GatewayRequest
from ..core.usage import Usage
from .entry import Entry, replay
from .service import SEMANTIC


async def serve_hit(request: GatewayRequest, entry: Entry, delivery: Delivery, result: str) -> Outcome:
    """Replay the entry to the client; what goes wrong (the client gone) travels in the Outcome."""
    tier = request.route.tier
    usage = Usage(entry.prompt_tokens, entry.completion_tokens, reported=True, source="semantic_cache" if result == SEMANTIC else "cache")
    answer, error = None, None
    try:
        headers = {**request.ctx.headers(tier, "cache"), CACHE: result}
        answer = await replay(entry, delivery, request.include_usage, headers)
    except BaseException as exc:  # cancellation too: serve re-raises it after conclude
        error = exc
    return Outcome(request.kind, request.stream, tier, 0, None, usage, request.id, cut=False, stream_error=False,
                   answer=answer, error=error, cache=result)
