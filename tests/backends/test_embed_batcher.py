"""The embeddings batcher: inputs of concurrent requests share one forward pass; the queue is bounded.

A gate holds the first forward pass, so what queues behind it is known exactly (no timing)."""
import asyncio
import threading

import pytest
import torch

from backends.embed_batcher import EmbedBatcher, QueueFullError
from tests.support import wait_for


class GatedEmbed:
    def __init__(self):
        self.gate = threading.Event()
        self.calls: list[int] = []

    def __call__(self, batch):
        self.calls.append(len(batch))
        assert self.gate.wait(30)
        return torch.tensor([[float(ids[0]), float(len(ids))] for ids in batch])


async def test_requests_waiting_together_share_one_batch():
    embed = GatedEmbed()
    batcher = EmbedBatcher(embed, max_batch=64, max_queued=100)
    batcher.start()
    try:
        first = asyncio.create_task(batcher.submit([[1]]))
        await wait_for(lambda: embed.calls == [1])  # the first pass is running, held at the gate
        rest = [asyncio.create_task(batcher.submit([[10 + i, 0], [20 + i]])) for i in range(5)]
        await wait_for(lambda: batcher.queued() == 10)
        embed.gate.set()
        results = await asyncio.gather(first, *rest)
    finally:
        await batcher.stop()
    assert embed.calls == [1, 10]  # five requests' ten inputs in one pass
    assert results[0] == [[1.0, 1.0]]
    assert results[3] == [[12.0, 2.0], [22.0, 1.0]]  # each request gets its own rows, in order


async def test_full_queue_refuses_whole_requests():
    embed = GatedEmbed()
    batcher = EmbedBatcher(embed, max_batch=64, max_queued=3)
    batcher.start()
    try:
        running = asyncio.create_task(batcher.submit([[1]]))
        await wait_for(lambda: embed.calls == [1])
        waiting = asyncio.create_task(batcher.submit([[2], [3]]))
        await wait_for(lambda: batcher.queued() == 2)
        with pytest.raises(QueueFullError):
            await batcher.submit([[4], [5]])  # 2 + 2 > 3: refused whole, nothing queued
        assert batcher.queued() == 2
        embed.gate.set()
        assert len(await waiting) == 2 and len(await running) == 1
    finally:
        await batcher.stop()


async def test_batch_respects_token_budget():
    embed = GatedEmbed()
    embed.gate.set()
    batcher = EmbedBatcher(embed, max_batch=64, max_batch_tokens=8, max_queued=100)
    batcher.start()
    try:
        await asyncio.gather(*(batcher.submit([[i] * 4]) for i in range(1, 5)))
    finally:
        await batcher.stop()
    assert max(embed.calls) <= 2 and sum(embed.calls) == 4  # 4-token inputs: at most 2 per 8-token pass


def test_every_forward_pass_runs_on_one_thread_of_its_own():
    """Not on the loop's shared pool, whose threads other work keeps busy (each thread grows an allocator
    arena of its own, and the worker's memory grew with them)."""
    seen = set()

    def embed(batch):
        seen.add((threading.get_ident(), threading.current_thread().name))
        return torch.zeros(len(batch), 2)

    async def run():
        batcher = EmbedBatcher(embed, max_batch=1, max_queued=100)
        batcher.start()
        try:  # other work on the shared pool at the same time
            others = [asyncio.to_thread(threading.Event().wait, 0.01) for _ in range(8)]
            await asyncio.gather(*[batcher.submit([[i]]) for i in range(20)], *others)
        finally:
            await batcher.stop()
        return batcher.batches

    assert asyncio.run(run()) == 20
    assert len(seen) == 1
    assert next(iter(seen))[1].startswith("embed")
