"""A generation's phases as OpenTelemetry spans under the request's server span (docs/tracing.md):
queue (until the scheduler first admits it), prefill (until the first token) and decode (until the
last). They are made after the answer, from readings the engine and the request timer take anyway
(time.monotonic()), so the engine loop never touches tracing. A no-op while tracing is off."""
from __future__ import annotations

import time

from backends.engine.core.async_engine import Delta
from webwire import tracing

from .timing import RequestTimer


def record_phases(timer: RequestTimer, opened: list[tuple[Delta, object]], request, model: str,
                  priority: str) -> None:
    """`opened`: the request's streams with their first deltas (empty when none started)."""
    if not tracing.enabled():
        return
    server = tracing.current_span()
    server.set_attributes({"gen_ai.request.model": model, "tiergate.priority": priority,
                           "tiergate.request_id": request.headers.get("x-request-id", "")})
    if not opened:
        return  # refused or failed before the engine produced anything: no phases to show
    first = opened[0][0]  # the first choice's first delta: its prompt, and when it was scheduled
    scheduled = first.scheduled_time or timer.start
    first_token = timer.first or scheduled
    end = timer.end or time.monotonic()  # not finished: the client went away, or the engine failed
    tracing.record_past("queue", timer.start, scheduled, {"tiergate.priority": priority})
    tracing.record_past("prefill", scheduled, first_token, {
        "gen_ai.usage.input_tokens": first.num_prompt_tokens, "tiergate.cached_tokens": first.num_cached_tokens})
    tracing.record_past("decode", first_token, end, {
        "gen_ai.usage.output_tokens": timer.output_tokens, "tiergate.finished": timer.finished})
    server.set_attributes({"gen_ai.usage.input_tokens": first.num_prompt_tokens,
                           "gen_ai.usage.output_tokens": timer.output_tokens})
