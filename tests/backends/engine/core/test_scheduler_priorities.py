"""Priorities in the scheduler: interactive work is admitted and served first, batch work gets
what it leaves and is preempted first, an aged batch request is admitted like an interactive
one, and batch work alone runs with the whole budget."""
from __future__ import annotations

import time

from backends.engine.core.block_manager import BlockManager
from backends.engine.config import EngineConfig
from backends.engine.core.scheduler import Scheduler
from backends.engine.core.sequence import BATCH, SamplingParams, Sequence


def _seq(first: int, n: int, priority: str = "interactive") -> Sequence:
    return Sequence(list(range(first, first + n)), SamplingParams(priority=priority, max_tokens=64))


def _started(scheduler: Scheduler, *seqs: Sequence, steps: int = 1) -> None:
    for seq in seqs:
        scheduler.add(seq)
    _decoding(scheduler, steps)


def _decoding(scheduler: Scheduler, steps: int) -> None:
    """Run `steps` steps as a forward pass would: everything scheduled is computed, one token each."""
    for _ in range(steps):
        for seq, n in scheduler.schedule():
            seq.num_computed_tokens += n
            if seq.num_computed_tokens == seq.num_tokens:
                seq.append_token(7)


def _scheduler(num_blocks: int, **config) -> Scheduler:
    return Scheduler(EngineConfig(model="x", block_size=4, **config), BlockManager(num_blocks, 4))


def test_interactive_is_admitted_before_older_batch_work():
    scheduler = Scheduler(EngineConfig(model="x", max_num_batched_tokens=8, block_size=4), BlockManager(64, 4))
    batch = _seq(0, 8, BATCH)
    scheduler.add(batch)
    user = _seq(100, 8)
    scheduler.add(user)
    assert scheduler.schedule() == [(user, 8)]  # the batch prompt waits for what interactive work leaves
    assert scheduler.waiting_by_priority() == {"interactive": 0, "batch": 1}
    user.num_computed_tokens = 8
    user.append_token(7)
    assert scheduler.schedule() == [(user, 1), (batch, 7)]
    assert scheduler.scheduled_tokens == {"interactive": 9, "batch": 7}


def test_running_interactive_work_is_served_before_running_batch_work():
    scheduler = Scheduler(EngineConfig(model="x", max_num_batched_tokens=64, block_size=4), BlockManager(64, 4))
    batch, user = _seq(0, 4, BATCH), _seq(100, 4)
    scheduler.add(batch)
    _decoding(scheduler, 1)
    scheduler.add(user)
    _decoding(scheduler, 1)
    assert [seq for seq, _ in scheduler.schedule()] == [user, batch]


def test_batch_work_is_preempted_first_when_blocks_run_out():
    scheduler = Scheduler(EngineConfig(model="x", max_num_batched_tokens=64, block_size=4), BlockManager(6, 4))
    user, batch = _seq(0, 4), _seq(100, 4, BATCH)
    scheduler.add(batch)
    scheduler.add(user)
    for _ in range(12):  # both grow until the pool is short
        _decoding(scheduler, 1)
        if scheduler.num_preemptions:
            break
    assert scheduler.preemptions == {"interactive": 0, "batch": 1}
    assert batch in scheduler.waiting and user in scheduler.running


def test_an_aged_batch_request_is_admitted_like_an_interactive_one():
    config = EngineConfig(model="x", max_num_batched_tokens=8, block_size=4, batch_max_wait_s=5.0)
    scheduler = Scheduler(config, BlockManager(64, 4))
    old = _seq(0, 8, BATCH)
    old.arrival_time = time.monotonic() - 6.0
    scheduler.add(old)
    scheduler.add(_seq(100, 8))
    assert scheduler.schedule() == [(old, 8)]


def test_batch_work_alone_gets_the_whole_budget():
    config = EngineConfig(model="x", max_num_batched_tokens=16, block_size=4)
    scheduler = Scheduler(config, BlockManager(64, 4))
    seqs = [_seq(i * 10, 8, BATCH) for i in range(3)]
    for seq in seqs:
        scheduler.add(seq)
    assert sum(n for _, n in scheduler.schedule()) == 16


def test_a_step_that_computes_an_interactive_prompt_carries_no_batch_prompt_work():
    scheduler = _scheduler(64, max_num_batched_tokens=64)
    batch = [_seq(i * 10, 4, BATCH) for i in range(3)]
    _started(scheduler, *batch, steps=2)  # the batch sequences are decoding
    chunked = _seq(40, 20, BATCH)  # a batch prompt halfway through its chunks
    scheduler.add(chunked)
    chunked.num_computed_tokens = 10
    queued, user = _seq(70, 4, BATCH), _seq(100, 8)
    scheduler.add(queued)
    scheduler.add(user)
    # the decodes ride along; the batch prompt chunk and the queued batch request sit it out
    assert scheduler.schedule() == [*[(seq, 1) for seq in batch], (user, 8)]
    for seq in batch:
        seq.num_computed_tokens += 1
        seq.append_token(7)
    user.num_computed_tokens = 8
    user.append_token(7)
    assert [seq for seq, _ in scheduler.schedule()] == [user, *batch, chunked, queued]  # back with the next


def test_batch_prompts_sit_out_every_chunk_of_a_long_interactive_prompt():
    scheduler = _scheduler(64, max_num_batched_tokens=8)
    batch = _seq(0, 4, BATCH)
    _started(scheduler, batch)
    user, queued = _seq(100, 20), _seq(50, 4, BATCH)
    scheduler.add(user)
    scheduler.add(queued)
    chunks = []
    for _ in range(3):
        step = scheduler.schedule()
        chunks.append(step)
        for seq, n in step:
            seq.num_computed_tokens += n
            if seq is batch:
                seq.append_token(7)
    assert chunks == [[(batch, 1), (user, 7)], [(user, 8)], [(user, 5), (batch, 1)]]  # never the queued prompt
    user.append_token(7)
    assert scheduler.schedule() == [(user, 1), (batch, 1), (queued, 4)]


def test_batch_sequences_keep_decoding_beside_an_interactive_prompt():
    scheduler = _scheduler(64, max_num_batched_tokens=64, batch_max_wait_s=5.0)
    old, young = _seq(0, 4, BATCH), _seq(10, 4, BATCH)
    _started(scheduler, old, young)
    old.arrival_time = time.monotonic() - 6.0
    user = _seq(100, 8)
    scheduler.add(user)
    assert scheduler.schedule() == [(old, 1), (young, 1), (user, 8)]


def test_interactive_work_takes_the_slot_of_the_newest_running_batch_sequence():
    scheduler = _scheduler(64, max_num_batched_tokens=64, max_num_seqs=2)
    first, second, queued = _seq(0, 4, BATCH), _seq(10, 4, BATCH), _seq(20, 4, BATCH)
    _started(scheduler, first, second, queued, steps=2)
    user = _seq(100, 8)
    scheduler.add(user)
    assert scheduler.schedule() == [(first, 1), (user, 8)]  # the preempted one's decode left the step
    assert scheduler.running == [user, first]
    assert list(scheduler.waiting) == [second, queued]  # the preempted one is next in line
    assert scheduler.preemptions == {"interactive": 0, "batch": 1}
    assert not second.block_table


def test_interactive_work_takes_the_blocks_of_running_batch_sequences():
    scheduler = _scheduler(8, max_num_batched_tokens=64)
    batch = _seq(0, 20, BATCH)  # 5 of the 8 blocks; 1 more is the watermark
    _started(scheduler, batch)
    user = _seq(100, 12)  # needs 3 blocks: 2 are free beyond the watermark
    scheduler.add(user)
    assert scheduler.schedule() == [(user, 12)]
    assert scheduler.preemptions == {"interactive": 0, "batch": 1}
    assert list(scheduler.waiting) == [batch]


def test_batch_work_never_preempts_batch_work_for_a_slot():
    scheduler = _scheduler(64, max_num_batched_tokens=64, max_num_seqs=1)
    first, second = _seq(0, 4, BATCH), _seq(10, 4, BATCH)
    _started(scheduler, first, second, steps=3)
    assert scheduler.running == [first] and scheduler.num_preemptions == 0


def test_beside_interactive_work_batch_prompts_get_a_small_share_of_the_step():
    scheduler = _scheduler(64, max_num_batched_tokens=64, batch_prefill_chunk=6)
    user = _seq(100, 4)
    _started(scheduler, user)
    long_batch, short_batch = _seq(0, 20, BATCH), _seq(30, 4, BATCH)
    scheduler.add(long_batch)
    scheduler.add(short_batch)
    assert scheduler.schedule() == [(user, 1), (long_batch, 6)]  # the short one waits for the next share
    long_batch.num_computed_tokens = 6
    user.num_computed_tokens += 1
    user.append_token(7)
    assert scheduler.schedule() == [(user, 1), (long_batch, 6)]


def test_batch_prompts_alone_take_the_whole_budget_whatever_the_share():
    scheduler = _scheduler(64, max_num_batched_tokens=32, batch_prefill_chunk=6)
    first, second = _seq(0, 20, BATCH), _seq(30, 20, BATCH)
    scheduler.add(first)
    scheduler.add(second)
    assert scheduler.schedule() == [(first, 20), (second, 12)]


def test_aged_batch_requests_hold_no_batch_work_back():
    scheduler = _scheduler(64, max_num_batched_tokens=64, max_num_seqs=1, batch_max_wait_s=5.0,
                           batch_prefill_chunk=2)
    running = _seq(0, 4, BATCH)
    _started(scheduler, running)
    old = _seq(10, 8, BATCH)
    old.arrival_time = time.monotonic() - 6.0
    scheduler.add(old)
    assert scheduler.schedule() == [(running, 1)]  # no preemption for it, and no step sat out
    assert scheduler.num_preemptions == 0
    scheduler.release(running)
    assert scheduler.schedule() == [(old, 8)]  # admitted first, its prompt whole
