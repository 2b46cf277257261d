"""The scheduler owns what a step does to its sequences (Scheduler.postprocess) and schedules a
decode batch again before its tokens are known (Scheduler.schedule_ahead), with no model."""
from __future__ import annotations

from backends.engine.config import EngineConfig
from backends.engine.core.block_manager import BlockManager
from backends.engine.core.scheduler import Scheduler
from backends.engine.core.sequence import INTERACTIVE, SamplingParams, Sequence

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
