"""Batching of embedding inputs across concurrent requests.

Every input of every request waits in one bounded queue; a single loop takes up to
`max_batch` inputs (and at most `max_batch_tokens` padded tokens) at a time, runs them as
one forward pass off the event loop, and resolves each input's future. A request whose
inputs do not fit in the queue is refused whole (QueueFullError -> HTTP 503), so memory
stays bounded however many clients arrive at once.
"""
from __future__ import annotations

import asyncio
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass


class QueueFullError(Exception):
    pass


@dataclass
class _Item:
    ids: list[int]
    future: asyncio.Future


class EmbedBatcher:
    def __init__(self, embed, max_batch: int = 64, max_batch_tokens: int = 16384, max_queued: int = 4096):
        self.embed = embed  # list[list[int]] -> tensor of rows (runs in a worker thread)
        self.max_batch, self.max_batch_tokens, self.max_queued = max_batch, max_batch_tokens, max_queued
        self.queue: deque[_Item] = deque()
        self.batches = 0  # forward passes run (tests and metrics read it)
        self.largest_batch = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        # one thread for every forward pass: a pool's threads each grow an allocator arena of their own
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._thread.shutdown(wait=False)

    def queued(self) -> int:
        return len(self.queue)

    async def submit(self, id_lists: list[list[int]]) -> list:
        """The vectors of these inputs, in order; refuses the whole request when the queue is full."""
        if len(self.queue) + len(id_lists) > self.max_queued:
            raise QueueFullError(f"embedding queue is full ({len(self.queue)} inputs waiting, "
                                 f"limit {self.max_queued}); retry shortly")
        loop = asyncio.get_running_loop()
        items = [_Item(ids, loop.create_future()) for ids in id_lists]
        self.queue.extend(items)
        self._wake.set()
        try:
            return [await item.future for item in items]
        finally:  # a client that went away: its queued inputs are skipped, not computed
            for item in items:
                item.future.cancel()

    def _take(self) -> list[_Item]:
        batch, longest = [], 0
        while self.queue and len(batch) < self.max_batch:
            item = self.queue[0]
            if item.future.done():  # cancelled by a departed client
                self.queue.popleft()
                continue
            wider = max(longest, len(item.ids))
            if batch and wider * (len(batch) + 1) > self.max_batch_tokens:
                break
            longest = wider
            batch.append(self.queue.popleft())
        return batch

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while batch := self._take():
                try:
                    ids = [item.ids for item in batch]
                    vectors = await asyncio.get_running_loop().run_in_executor(self._thread, self.embed, ids)
                except Exception as exc:  # answer every waiting input instead of hanging it
                    for item in batch:
                        if not item.future.done():
                            item.future.set_exception(exc)
                    continue
                self.batches += 1
                self.largest_batch = max(self.largest_batch, len(batch))
                for item, vector in zip(batch, vectors.tolist()):
                    if not item.future.done():
                        item.future.set_result(vector)
