"""The engine's loop (engine/core/llm_engine.py) on a tiny random Llama: a step advances every
running sequence by one token, finished sequences leave the batch and give their blocks back, an
ended request leaves the rest running, and a request too large for the window or the pool is
refused before it queues."""
from __future__ import annotations

import pytest

from backends.engine import EngineConfig, SamplingParams
from backends.engine.core.llm_engine import LLMEngine, RequestTooLargeError

from tests.backends.models import tiny_llama


@pytest.fixture(scope="module")
def model():
    return tiny_llama()[0]


def _engine(model, **overrides) -> LLMEngine:
    return LLMEngine(EngineConfig(model="t", **{"block_size": 4, "num_blocks": 64, **overrides}), model=model)


def _params(max_tokens: int) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)


def test_each_step_advances_every_running_sequence_by_one_token(model):
    engine = _engine(model)
    seqs = [engine.add_request(list(range(1, n)), _params(4)) for n in (3, 6, 10)]
    for expected in (1, 2, 3):
        outputs = engine.step()
        assert sorted(seq.seq_id for seq, _ in outputs) == [seq.seq_id for seq in seqs]
        assert [seq.num_output_tokens for seq in seqs] == [expected] * 3
        assert [token for _, token in outputs] == [seq.output_ids[-1] for seq in seqs]
    assert engine.num_generated_tokens == 9


def test_finished_sequences_leave_the_batch_and_free_their_blocks(model):
    engine = _engine(model)
    short, long = engine.add_request([1, 2, 3], _params(1)), engine.add_request([4, 5, 6], _params(3))
    engine.step()
    assert short.finish_reason == "length" and short.block_table == []
    assert engine.scheduler.running == [long]
    assert [seq for seq, _ in engine.step()] == [long]
    engine.step()
    assert long.is_finished and not engine.has_work() and engine.step() == []
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


def test_an_ended_request_leaves_and_the_others_run_on(model):
    engine = _engine(model)
    aborted, kept = engine.add_request([1, 2, 3], _params(8)), engine.add_request([4, 5, 6], _params(2))
    engine.step()
    engine.complete(aborted, "abort")
    assert aborted.finish_reason == "abort" and aborted.block_table == []
    while engine.has_work():
        assert [seq for seq, _ in engine.step()] == [kept]
    assert aborted.num_output_tokens == 1 and kept.num_output_tokens == 2  # nothing after the abort



def test_a_request_beyond_the_window_or_the_pool_is_refused(model):
    engine = _engine(model, max_model_len=16)
    with pytest.raises(RequestTooLargeError, match="context window"):
        engine.add_request(list(range(1, 11)), _params(7))
    small_pool = _engine(model, num_blocks=4)  # one block is kept spare: 12 tokens fit
    with pytest.raises(RequestTooLargeError, match="KV cache"):
        small_pool.add_request(list(range(1, 11)), _params(3))
    assert not engine.has_work() and not small_pool.has_work()
