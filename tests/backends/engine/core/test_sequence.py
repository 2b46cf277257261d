"""One request's state (engine/core/sequence.py): when an appended token ends it and why, its
output as distinct from its prompt, and its seeded generator."""
from __future__ import annotations

import pytest
import torch

from backends.engine.core.sequence import SamplingParams, Sequence, SequenceStatus

EOS = 2


def test_a_sequence_needs_a_prompt():
    with pytest.raises(ValueError):
        Sequence([], SamplingParams())


def test_eos_stops_it_unless_ignored_and_stop_ids_stop_it_always():
    seq = Sequence([1, 3], SamplingParams(max_tokens=8), eos_token_ids={EOS})
    seq.append_token(5)
    assert seq.status is SequenceStatus.WAITING and seq.finish_reason is None
    seq.append_token(EOS)
    assert seq.is_finished and seq.finish_reason == "stop" and seq.output_ids == [5, EOS]

    ignoring = Sequence([1], SamplingParams(max_tokens=8, ignore_eos=True, stop_token_ids=[9]), eos_token_ids={EOS})
    ignoring.append_token(EOS)
    assert not ignoring.is_finished
    ignoring.append_token(9)
    assert ignoring.finish_reason == "stop"


def test_max_tokens_counts_output_only_and_finishes_with_length():
    seq = Sequence([1, 2, 3, 4], SamplingParams(max_tokens=2))
    seq.append_token(5)
    assert not seq.is_finished and seq.num_output_tokens == 1 and seq.num_tokens == 5
    seq.append_token(6)
    assert seq.finish_reason == "length" and seq.output_ids == [5, 6]


def test_a_stop_token_at_the_budget_is_a_stop():
    seq = Sequence([1], SamplingParams(max_tokens=1), eos_token_ids={EOS})
    seq.append_token(EOS)
    assert seq.finish_reason == "stop"


def test_the_same_seed_gives_the_same_draws_and_no_seed_no_generator():
    a, b = (Sequence([1], SamplingParams(seed=4)) for _ in range(2))
    assert torch.equal(torch.rand(8, generator=a.generator), torch.rand(8, generator=b.generator))
    assert Sequence([1], SamplingParams()).generator is None


def test_plain_means_nothing_beyond_temperature_top_k_and_top_p():
    assert SamplingParams(temperature=0.7, top_k=5, top_p=0.9).is_plain
    assert not SamplingParams(repetition_penalty=1.1).is_plain
    assert not SamplingParams(logit_bias={3: 1.0}).is_plain
    assert not SamplingParams(logprobs=0).is_plain
    assert SamplingParams(presence_penalty=0.5).has_penalties and not SamplingParams().has_penalties
