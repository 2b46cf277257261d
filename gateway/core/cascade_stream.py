"""The cascade on a stream: the first tier's tokens are held back until the decision (the whole
answer when max_tokens is at most the tenant's hold_whole_max_tokens, else its first hold_tokens),
then the chosen answer streams: the held tokens and the rest of the first tier's, or the next tier
up's from its start, the first attempt stopped at its worker and billed what it generated."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace

from wire.errors import OpenAIError
from wire.sse import iter_events

from ..config import Config
from .answer_text import generated_texts
from .cascade import ESCALATED, KEPT, CascadePlan, CascadeVerdict, Confidence, judge
from .upstream import RETRYABLE, Ask, Attempts, Opened, Upstreams, open_upstream
from .usage import AttemptBill, Usage, reported_in
from .worker_usage import count_unreported

MAX_HELD_BYTES = 8 << 20  # past this much held, the decision is taken on what came


@dataclass
class Held:
    """What the first tier streamed while held back: its bytes as they came, their payloads,
    their logprobs, and whether it finished (and the usage it reported then)."""
    raw: bytearray
    payloads: list[bytes] = field(default_factory=list)
    confidence: Confidence = field(default_factory=Confidence)
    done: bool = False
    usage: Usage | None = None
    first_token_at: float = 0.0

    def read(self, data: bytes) -> None:
        self.payloads.append(data)
        try:
            obj = json.loads(data)
        except ValueError:
            return  # the relay meets the same frame and ends the stream on it
        if not isinstance(obj, dict):
            return
        if obj.get("choices") and not self.first_token_at:
            self.first_token_at = time.perf_counter()
        self.confidence.add(obj)
        self.usage = reported_in(obj) or self.usage


async def hold(opened: Opened, tokens: int) -> Held:
    """Read the first tier's stream until `tokens` tokens (or its end) came."""
    held, pending = Held(bytearray(opened.body)), bytearray(opened.body)
    try:
        while True:
            for data in iter_events(pending):
                if data == b"[DONE]":
                    held.done = True
                    return held
                held.read(data)
            if held.confidence.tokens >= tokens or len(held.raw) > MAX_HELD_BYTES:
                return held
            more = await opened.response.content.readany()
            if not more:
                return held
            held.raw += more
            pending += more
    except RETRYABLE:
        return held  # the relay reads on, meets the broken stream and ends it as it ends any other


async def cascade_stream(upstreams: Upstreams, config: Config, ask: Ask, plan: CascadePlan, opened: Opened,
                         attempts: Attempts) -> tuple[Opened, tuple[AttemptBill, ...], Attempts, CascadeVerdict]:
    """Hold the first tier's stream, decide, and return the stream the client gets: `opened` with
    what was held still to send, or the next tier up's (the first attempt billed beside it)."""
    held = await hold(opened, plan.hold_tokens)
    higher = ask.route.next_up(opened.tier)
    verdict = judge(plan, opened.tier, held.confidence.score(), higher)
    if verdict.outcome == ESCALATED:
        again = await open_upstream(upstreams, config, replace(ask, route=replace(ask.route, tier=higher),
                                                               first_attempt=attempts.count + 1, logprobs=False))
        attempts = attempts.then(again.attempts)
        if isinstance(again.error, OpenAIError):
            verdict = replace(verdict, outcome=KEPT, reason="upper_unavailable")
        else:
            reopened = again.answer()  # the client's cancellation is raised; conclude releases the first
            bill = await _stop_and_count(upstreams, ask, opened, held)
            return reopened, (bill,), attempts, _added(verdict, held)
    opened.body = bytes(held.raw)  # the relay sends what was held, then reads on
    return opened, (), attempts, _added(verdict, held)


async def _stop_and_count(upstreams: Upstreams, ask: Ask, opened: Opened, held: Held) -> AttemptBill:
    """The first attempt, given up for the tier above: stopped at its worker and billed its count
    (what it reported, when it finished while held)."""
    opened.response.close()
    opened.backend.on_done()
    if held.done and held.usage is not None:
        return AttemptBill(opened.attempt_id, opened.tier, held.usage)
    counted = await count_unreported(upstreams.post, ask, opened.attempt_id, opened.tier, opened.backend,
                                     generated_texts(*held.payloads), held.confidence.tokens or len(held.payloads))
    return AttemptBill(opened.attempt_id, opened.tier, counted)


def _added(verdict: CascadeVerdict, held: Held) -> CascadeVerdict:
    """The verdict with how much later than without the cascade the client's first token leaves."""
    since = held.first_token_at or time.perf_counter()
    return replace(verdict, held_s=max(0.0, time.perf_counter() - since))
