"""The worker's book of what recent requests generated (backends/serving/usage_book.py): bounded
in entries and in age, an unknown id is None (the endpoint's 404), and asking for a running
request aborts it and answers once its sequences ended, with their final count."""
from __future__ import annotations

import asyncio

from backends.serving.usage_book import UsageBook


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _served(book: UsageBook, request_id: str, prompt: int, completion: int) -> None:
    """A handler whose one sequence ends at once with these counts."""
    tally = book.open(request_id)
    tally.began()
    tally.ended(prompt, completion)
    tally.close()


async def _running(book: UsageBook, request_id: str, opened: asyncio.Event, generated: list[int]) -> None:
    """A handler generating until it is cancelled; the engine then reports what the sequence counted."""
    tally = book.open(request_id)
    tally.began()
    try:
        opened.set()
        await asyncio.Event().wait()
    finally:
        asyncio.get_running_loop().call_soon(tally.ended, 9, len(generated))  # the engine thread's report
        tally.close()


async def test_an_ended_request_is_counted_until_its_ttl_and_an_unknown_id_is_none():
    clock = Clock()
    book = UsageBook(ttl_s=60, clock=clock)
    await _served(book, "req-a", 11, 22)
    tally = await book.abort("req-a", wait_s=0)
    assert (tally.prompt_tokens, tally.completion_tokens, tally.done.is_set()) == (11, 22, True)
    assert await book.abort("req-unknown", wait_s=0) is None
    assert await book.abort("req-unknown", wait_s=0.01) is None and len(book) == 1  # the wait leaves nothing
    clock.now += 61
    assert await book.abort("req-a", wait_s=0) is None and len(book) == 0


async def test_the_book_keeps_at_most_max_entries_and_forgets_the_oldest():
    book = UsageBook(max_entries=3)
    for i in range(5):
        await _served(book, f"req-{i}", 1, i)
    assert len(book) == 3
    assert await book.abort("req-0", wait_s=0) is None and await book.abort("req-1", wait_s=0) is None
    assert (await book.abort("req-4", wait_s=0)).completion_tokens == 4


async def test_expired_entries_are_dropped_as_new_ones_come():
    clock = Clock()
    book = UsageBook(ttl_s=60, clock=clock)
    await _served(book, "req-old", 1, 1)
    clock.now += 61
    await _served(book, "req-new", 1, 1)
    assert len(book) == 1


async def test_ids_that_are_not_request_ids_are_not_kept():
    book = UsageBook()
    await _served(book, "x" * 129, 1, 1)
    await _served(book, "has space", 1, 1)
    await _served(book, None, 1, 1)
    assert len(book) == 0


async def test_asking_for_a_running_request_aborts_it_and_answers_its_final_count():
    book = UsageBook()
    opened = asyncio.Event()
    handler = asyncio.create_task(_running(book, "req-run", opened, [1, 2, 3]))
    await opened.wait()
    tally = await book.abort("req-run", wait_s=5)
    assert handler.cancelled()
    assert (tally.prompt_tokens, tally.completion_tokens, tally.done.is_set()) == (9, 3, True)


async def test_a_request_asked_for_before_it_arrives_is_aborted_when_it_does():
    book = UsageBook()
    asked = asyncio.create_task(book.abort("req-late", wait_s=5))
    await asyncio.sleep(0)  # the ask is registered first
    opened = asyncio.Event()
    handler = asyncio.create_task(_running(book, "req-late", opened, [1]))
    tally = await asked
    assert handler.cancelled()
    assert (tally.prompt_tokens, tally.completion_tokens) == (9, 1)
