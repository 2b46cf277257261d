"""What each request generated, kept a short while after it ended, under the caller's
x-request-id. The gateway asks for it (`POST /v1/internal/requests/{id}/abort`) when its client
left before the usage arrived, a stream cut short or a whole answer cancelled, so it bills the
worker's own count. Bounded in entries and in age; a waiter's wait is bounded too."""
from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

from webwire.errors import CLIENT_REQUEST_ID

MAX_ENTRIES = 4096  # requests remembered at most (running, ended, or awaited by a caller)
TTL_S = 120.0       # an ended request's count is forgotten this long after it ended
MAX_WAIT_S = 10.0   # the longest a caller may wait for a request to end


class Tally:
    """One HTTP request's sequences: how many the engine still runs, and what they counted. The
    engine calls began() as it takes a sequence and ended() (on the event loop) once it stopped it."""

    def __init__(self, task: asyncio.Task | None, clock=time.monotonic):
        self.task, self.clock = task, clock  # the handler's, cancelled to abort it; dropped once it ended
        self.arrived = task is not None  # False: only awaited so far
        self.running = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.closed = False  # the handler opens no more sequences
        self.abort_asked = False
        self.ended_at: float | None = None
        self.done = asyncio.Event()

    def began(self) -> None:
        self.running += 1

    def ended(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.running -= 1
        self.prompt_tokens = max(self.prompt_tokens, prompt_tokens)  # the n copies share one prompt
        self.completion_tokens += completion_tokens
        self._settle()

    def close(self) -> None:
        self.closed, self.task = True, None  # a finished task holds its response: not kept for the TTL
        self._settle()

    def _settle(self) -> None:
        if self.closed and self.running <= 0 and not self.done.is_set():
            self.ended_at = self.clock()
            self.done.set()


class UsageBook:
    def __init__(self, max_entries: int = MAX_ENTRIES, ttl_s: float = TTL_S, clock=time.monotonic):
        self.max_entries, self.ttl_s, self.clock = max_entries, ttl_s, clock
        self._entries: OrderedDict[str, Tally] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def open(self, request_id: str | None) -> Tally:
        """The tally of the request this handler serves; remembered when it has a usable id."""
        task = asyncio.current_task()
        if not request_id or not CLIENT_REQUEST_ID.match(request_id):
            return Tally(task, self.clock)
        tally = self._entries.get(request_id)
        if tally is not None and not tally.arrived:  # a caller is already waiting for this one
            tally.task, tally.arrived = task, True
            if tally.abort_asked:
                task.cancel()  # it gave up on it before it arrived: stop at the first await
        else:
            tally = Tally(task, self.clock)
        self._remember(request_id, tally)
        return tally

    async def abort(self, request_id: str, wait_s: float) -> Tally | None:
        """Abort the request if it still runs and wait (at most wait_s) for its sequences to end.
        None when no such request came (or it ended more than ttl_s ago)."""
        tally = self._live(request_id)
        if tally is None:
            if wait_s <= 0:
                return None
            tally = Tally(None, self.clock)  # it may be on its way still: its handler adopts this one
            self._remember(request_id, tally)
        tally.abort_asked = True
        if tally.task is not None:  # still serving it (closed drops the task: it may serve the next request)
            tally.task.cancel()
        try:
            await asyncio.wait_for(tally.done.wait(), min(wait_s, MAX_WAIT_S))
        except asyncio.TimeoutError:
            pass
        if not tally.arrived:  # it never came
            if self._entries.get(request_id) is tally:
                del self._entries[request_id]
            return None
        return tally

    def _live(self, request_id: str) -> Tally | None:
        tally = self._entries.get(request_id)
        if tally is not None and self._expired(tally, self.clock()):
            del self._entries[request_id]
            return None
        return tally

    def _expired(self, tally: Tally, now: float) -> bool:
        return tally.ended_at is not None and now - tally.ended_at > self.ttl_s

    def _remember(self, request_id: str, tally: Tally) -> None:
        self._entries[request_id] = tally
        self._entries.move_to_end(request_id)
        now = self.clock()
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        while self._entries and self._expired(next(iter(self._entries.values())), now):
            self._entries.popitem(last=False)
