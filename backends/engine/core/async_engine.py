"""Runs the engine's step loop on its own thread and streams results to asyncio callers.

The HTTP server's event loop never runs model code, so it stays responsive while the
engine computes. Requests and aborts cross into the engine thread through a queue; each
request's output comes back through its own asyncio queue.
"""
from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import AsyncIterator

from .detokenizer import IncrementalDetokenizer
from .llm_engine import LLMEngine, StepFailedError
from .scheduler import QueueFullError
from .sequence import SamplingParams, Sequence

log = logging.getLogger(__name__)


@dataclass
class Delta:
    text: str
    token_ids: list[int]
    finished: bool
    finish_reason: str | None
    num_prompt_tokens: int
    num_output_tokens: int
    num_cached_tokens: int
    logprobs: list | None = None  # (token, logprob, [(token, logprob)] top) per token, when asked for
    scheduled_time: float | None = None  # when the sequence was first scheduled (time.monotonic())


class _Request:
    def __init__(self, seq: Sequence, detok: IncrementalDetokenizer, loop: asyncio.AbstractEventLoop, tally=None):
        self.seq = seq
        self.detok = detok
        self.loop = loop
        self.tally = tally
        self.queue: asyncio.Queue[Delta | BaseException] = asyncio.Queue()

    def push(self, item) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, item)

    def ended(self) -> None:
        """The engine stopped this sequence (finished, aborted, failed or never taken): its
        final counts go to the tally, once."""
        tally, self.tally = self.tally, None
        if tally is not None:
            self.loop.call_soon_threadsafe(tally.ended, self.seq.num_prompt_tokens, self.seq.num_output_tokens)


class AsyncEngine:
    def __init__(self, core: LLMEngine):
        self.core = core  # the synchronous engine this one drives from its own thread
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._requests: dict[int, _Request] = {}
        self._wakeup = threading.Event()
        self._stopping = False
        self.last_step_time = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="engine-loop", daemon=True)
        self._thread.start()

    @property
    def tokenizer(self):
        return self.core.tokenizer

    def num_waiting(self) -> int:
        return len(self.core.scheduler.waiting) + self._inbox.qsize()

    def num_running(self) -> int:
        return len(self.core.scheduler.running)

    async def generate(self, prompt_ids: list[int], params: SamplingParams,
                       stop: list[str] | None = None, tally=None) -> AsyncIterator[Delta]:
        """Yields deltas until the sequence finishes. Closing the iterator early (client
        gone) aborts the sequence and frees its blocks. A `tally` (serving/usage_book.py) is
        told when the engine takes the sequence and, on the event loop, what it counted once
        it stopped: the final count of an aborted sequence too."""
        if params.grammar is None:
            seq = self.core.make_sequence(prompt_ids, params)  # raises RequestTooLargeError
        else:  # compiling a large schema's grammar can take a while: not on the event loop
            seq = await asyncio.to_thread(self.core.make_sequence, prompt_ids, params)
        if self.num_waiting() >= self.core.config.max_waiting:
            raise QueueFullError(f"waiting queue is full ({self.core.config.max_waiting} requests)")
        request = _Request(seq, IncrementalDetokenizer(self.tokenizer, prompt_ids, stop), asyncio.get_running_loop(),
                           tally)
        if tally is not None:
            tally.began()
        self._inbox.put(("add", request))
        self._wakeup.set()
        finished = False
        try:
            while not finished:
                item = await request.queue.get()
                if isinstance(item, BaseException):
                    raise item
                finished = item.finished
                yield item
        finally:
            if not finished:
                self._inbox.put(("abort", request))
                self._wakeup.set()

    def shutdown(self) -> None:
        self._stopping = True
        self._wakeup.set()
        self._thread.join(timeout=5)

    def _drain_inbox(self) -> None:
        while True:
            try:
                kind, request = self._inbox.get_nowait()
            except queue.Empty:
                return
            seq = request.seq
            if kind == "add":
                try:
                    self.core.add(seq)
                    self._requests[seq.seq_id] = request
                except QueueFullError as exc:
                    request.push(exc)
                    request.ended()
            elif seq.seq_id in self._requests:
                del self._requests[seq.seq_id]
                self.core.complete(seq, "abort")
                request.ended()

    def _emit(self, seq: Sequence, tokens: list[int]) -> None:
        """One delta per sequence per step; with speculation a step can bring several tokens,
        and only the delta carrying the last of them may say the sequence finished."""
        request = self._requests.get(seq.seq_id)
        if request is None:
            return
        detok = request.detok
        for token in tokens:
            detok.add(token)
        if detok.stopped and not seq.is_finished:
            self.core.complete(seq, "stop")  # a stop string ends the sequence
        logprobs = seq.logprobs[len(seq.logprobs) - len(tokens):] if seq.params.logprobs is not None else None
        delta = Delta(detok.take(seq.is_finished), tokens, seq.is_finished, seq.finish_reason,
                      seq.num_prompt_tokens, seq.num_output_tokens, seq.num_cached_tokens, logprobs,
                      seq.scheduled_time)
        if seq.is_finished:
            del self._requests[seq.seq_id]
            request.ended()
        request.push(delta)

    def _fail(self, seqs: list[Sequence], exc: BaseException) -> None:
        for seq in seqs:
            request = self._requests.pop(seq.seq_id, None)
            if request is not None:
                request.push(exc)
                request.ended()

    def _fail_all(self, exc: BaseException) -> None:
        for request in list(self._requests.values()):
            self.core.complete(request.seq, "error")
            request.push(exc)
            request.ended()
        self._requests.clear()

    def _loop(self) -> None:
        while not self._stopping:
            self._drain_inbox()
            if not self.core.has_work():
                self._wakeup.wait(timeout=1.0)
                self._wakeup.clear()
                continue
            try:
                outputs = self.core.step()
            except StepFailedError as exc:  # keep serving: only that step's requests fail
                log.error("%s (%d sequences)", exc, len(exc.seqs), exc_info=exc.__cause__)
                self._fail(exc.seqs, exc)
                continue
            except Exception as exc:  # keep serving: fail the in-flight requests, not the process
                log.exception("engine step failed")
                self._fail_all(RuntimeError(f"engine step failed: {exc}"))
                continue
            self.last_step_time = time.monotonic()
            by_seq: dict[int, tuple[Sequence, list[int]]] = {}
            for seq, token in outputs:
                by_seq.setdefault(seq.seq_id, (seq, []))[1].append(token)
            for seq, tokens in by_seq.values():
                self._emit(seq, tokens)
