"""The n engine streams of one request: opened so the copies share the prompt's KV, and
merged into one sequence of (choice index, delta)."""
from __future__ import annotations

import asyncio

from backends.engine.core.async_engine import AsyncEngine, Delta
from backends.engine.core.sequence import SamplingParams

QUEUE_PER_CHOICE = 64  # deltas buffered per choice before its pump waits for the writer


async def open_streams(engine: AsyncEngine, prompt_ids: list[int], params: list[SamplingParams],
                       stop: list[str], tally=None) -> list[tuple[Delta, object]]:
    """Start every choice's stream and wait for its first delta. The copies join only
    after the first choice's prompt is computed: its full blocks are then in the prefix
    cache, so the copies reuse them instead of computing the prompt again. `tally` counts
    what all of them generate (usage_book.py)."""
    streams = [engine.generate(prompt_ids, p, stop=stop, tally=tally) for p in params]
    opened: list[tuple[Delta, object]] = []
    try:
        first = await anext(streams[0])
        opened.append((first, streams[0]))
        if len(streams) > 1:
            firsts = await asyncio.gather(*(anext(s) for s in streams[1:]))
            opened.extend(zip(firsts, streams[1:]))
    except BaseException:
        for stream in streams:
            await stream.aclose()
        raise
    return opened


async def _chain(first: Delta, rest):
    yield first
    if not first.finished:
        async for delta in rest:
            yield delta


async def merged(opened: list[tuple[Delta, object]]):
    """Yields (index, delta) from all choices as they come."""
    if len(opened) == 1:
        async for delta in _chain(*opened[0]):
            yield 0, delta
        return
    queue: asyncio.Queue = asyncio.Queue(maxsize=QUEUE_PER_CHOICE * len(opened))

    async def pump(index: int, first: Delta, stream) -> None:
        try:
            async for delta in _chain(first, stream):
                await queue.put((index, delta))
        except Exception as exc:  # handed to the consumer, which raises it
            await queue.put((index, exc))
        await queue.put((index, None))

    tasks = [asyncio.create_task(pump(i, first, stream)) for i, (first, stream) in enumerate(opened)]
    try:
        remaining = len(tasks)
        while remaining:
            index, item = await queue.get()
            if item is None:
                remaining -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                yield index, item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
