"""The scheduler (engine/core/scheduler.py) with no model: the token budget (decodes first, long
prompts in chunks), preemption when blocks run out, what a step does to its sequences
(Scheduler.postprocess), and the decode batch scheduled again before its tokens are known
(Scheduler.schedule_ahead). Priorities are in test_scheduler_priorities.py."""
from __future__ import annotations

import pytest

from backends.engine.config import EngineConfig
from backends.engine.core.block_manager import BlockManager
from backends.engine.core.scheduler import QueueFullError, Scheduler
from backends.engine.core.sequence import INTERACTIVE, SamplingParams, Sequence, SequenceStatus

EOS = 2


def _running(*params: SamplingParams) -> tuple[Scheduler, list[tuple[Sequence, int]]]:
    """A scheduler whose first step admitted one 4-token prompt per `params`."""
    scheduler = Scheduler(EngineConfig(model="m", block_size=4), BlockManager(num_blocks=16, block_size=4))
    for p in params:
        scheduler.add(Sequence([10, 11, 12, 13], p, eos_token_ids={EOS}))
    return scheduler, scheduler.schedule()


def test_postprocess_appends_stops_and_releases_a_finished_sequence():
    scheduler, step = _running(SamplingParams(max_tokens=8), SamplingParams(max_tokens=8))
    (going, _), (stopping, _) = step
    free = scheduler.blocks.num_free_blocks
    outputs = scheduler.postprocess(step, {going.seq_id: [5], stopping.seq_id: [EOS, 7]})  # 7 comes after the stop
    assert outputs == [(going, 5), (stopping, EOS)]
    assert stopping.finish_reason == "stop" and stopping not in scheduler.running and stopping.block_table == []
    assert scheduler.blocks.num_free_blocks == free + 1  # the stopped sequence's one block came back
    assert going.num_computed_tokens == 4 and going.output_ids == [5]
    assert scheduler.blocks.block_hashes[going.seq_id]  # its full prompt block joined the prefix cache


def test_postprocess_drops_the_token_of_a_sequence_that_ended_meanwhile():
    scheduler, step = _running(SamplingParams(max_tokens=8))
    (seq, n), = step
    seq.mark_finished("abort")
    scheduler.release(seq)
    counted = dict(scheduler.scheduled_tokens)
    assert scheduler.postprocess(step, {seq.seq_id: [5]}, ran_ahead=True) == []
    assert seq.output_ids == [] and dict(scheduler.scheduled_tokens) == counted


def test_a_step_run_ahead_is_counted_when_its_tokens_arrive():
    scheduler, step = _running(SamplingParams(max_tokens=8))
    scheduler.postprocess(step, {step[0][0].seq_id: [5]})
    before = scheduler.scheduled_tokens[INTERACTIVE]
    ahead = scheduler.schedule_ahead(scheduler.schedule())
    assert scheduler.scheduled_tokens[INTERACTIVE] == before + 1  # the step it continues
    scheduler.postprocess(ahead, {step[0][0].seq_id: [6]}, ran_ahead=True)
    assert scheduler.scheduled_tokens[INTERACTIVE] == before + 2


def test_schedule_ahead_reserves_two_slots_only_where_the_next_step_is_certain():
    scheduler, step = _running(SamplingParams(max_tokens=8), SamplingParams(max_tokens=8))
    scheduler.postprocess(step, {seq.seq_id: [5] for seq, _ in step})
    decode = scheduler.schedule()
    ahead = scheduler.schedule_ahead(decode)
    assert ahead == [(seq, 1) for seq, _ in decode]
    # the pending token (position 5) and the next one (6) have their slots: a second block each
    assert all(len(seq.block_table) == 2 for seq, _ in decode)

    scheduler.add(Sequence([1, 2], SamplingParams()))
    assert scheduler.schedule_ahead(decode) is None  # a waiting sequence changes the next batch


def test_schedule_ahead_declines_a_batch_that_may_end_or_needs_the_host():
    last_token, step = _running(SamplingParams(max_tokens=1))
    assert last_token.schedule_ahead(step) is None  # its next token may be its last
    penalized, step = _running(SamplingParams(max_tokens=8, repetition_penalty=1.2))
    assert penalized.schedule_ahead(step) is None


def test_waiting_queue_is_bounded():
    config = EngineConfig(model="x", max_waiting=2)
    scheduler = Scheduler(config, BlockManager(8, 4))
    scheduler.add(Sequence([1], SamplingParams()))
    scheduler.add(Sequence([2], SamplingParams()))
    with pytest.raises(QueueFullError):
        scheduler.add(Sequence([3], SamplingParams()))


def test_token_budget_covers_decodes_first_then_chunks_new_prompts():
    config = EngineConfig(model="x", max_num_batched_tokens=6, block_size=4)
    scheduler = Scheduler(config, BlockManager(32, 4))
    first = Sequence(list(range(5)), SamplingParams())
    scheduler.add(first)
    assert scheduler.schedule() == [(first, 5)]
    first.num_computed_tokens = 5
    first.append_token(42)  # now decoding
    second = Sequence(list(range(100, 120)), SamplingParams())
    scheduler.add(second)
    assert scheduler.schedule() == [(first, 1), (second, 5)]  # decode, then a 5-token chunk


def _step(scheduler: Scheduler, token: int = 7) -> list[tuple[Sequence, int]]:
    """One step as the engine runs it: every scheduled sequence whose prompt is done gets `token`."""
    scheduled = scheduler.schedule()
    scheduler.postprocess(scheduled, {seq.seq_id: [token] for seq, n in scheduled
                                      if seq.num_computed_tokens + n == seq.num_tokens})
    return scheduled


def test_a_long_prompt_runs_in_chunks_of_the_budget_and_samples_after_the_last():
    scheduler = Scheduler(EngineConfig(model="x", max_num_batched_tokens=4, block_size=4), BlockManager(16, 4))
    seq = Sequence(list(range(10)), SamplingParams(max_tokens=8))
    scheduler.add(seq)
    assert [n for _, n in _step(scheduler)] == [4] and seq.num_computed_tokens == 4 and seq.output_ids == []
    assert [n for _, n in _step(scheduler)] == [4] and seq.output_ids == []
    assert [n for _, n in _step(scheduler)] == [2] and seq.output_ids == [7]  # the prompt's last chunk
    assert [n for _, n in _step(scheduler)] == [1]  # then one token a step


def test_admission_stops_at_the_sequence_slots():
    scheduler = Scheduler(EngineConfig(model="x", max_num_seqs=2, block_size=4), BlockManager(16, 4))
    seqs = [Sequence([i, i + 1], SamplingParams()) for i in range(0, 6, 2)]
    for seq in seqs:
        scheduler.add(seq)
    assert [seq for seq, _ in scheduler.schedule()] == seqs[:2]
    assert list(scheduler.waiting) == seqs[2:]


def test_the_newest_running_sequence_is_preempted_when_blocks_run_out():
    # 4 blocks of 4 tokens: three one-block prompts leave one free (admission keeps a block spare)
    scheduler = Scheduler(EngineConfig(model="x", block_size=4), BlockManager(num_blocks=4, block_size=4))
    first, second, newest = (Sequence(list(range(n)), SamplingParams(max_tokens=8)) for n in (3, 4, 2))
    for seq in (first, second, newest):
        scheduler.add(seq)
    _step(scheduler)
    _step(scheduler)  # second's next token takes the last free block
    assert scheduler.blocks.num_free_blocks == 0
    later = Sequence([50, 51], SamplingParams())
    scheduler.add(later)
    # first's next token needs a block: the newest sequence gives its own back and waits, ahead of `later`
    assert scheduler.schedule() == [(first, 1), (second, 1)]
    assert newest.status is SequenceStatus.WAITING and newest.block_table == [] and newest.num_computed_tokens == 0
    assert list(scheduler.waiting) == [newest, later] and scheduler.running == [first, second]
    assert scheduler.num_preemptions == 1 and scheduler.preemptions[INTERACTIVE] == 1
    assert newest.output_ids == [7, 7]  # its tokens stay: it is recomputed, not restarted


def test_postprocess_finishes_at_max_tokens_and_frees_the_blocks():
    scheduler, step = _running(SamplingParams(max_tokens=2))
    (seq, _), = step
    scheduler.postprocess(step, {seq.seq_id: [5]})
    assert not seq.is_finished
    scheduler.postprocess(scheduler.schedule(), {seq.seq_id: [6]})
    assert seq.finish_reason == "length" and seq.output_ids == [5, 6]
    assert scheduler.running == [] and seq.block_table == [] and scheduler.blocks.num_free_blocks == 16
    assert not scheduler.has_work()
