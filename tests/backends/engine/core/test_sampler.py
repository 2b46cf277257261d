"""The engine's sampler (engine/core/sampler.py) on hand-made logits, with no model: each row is
drawn by its own request's settings, greedy at temperature 0, top-k / top-p restrict what can be
drawn, a seed repeats its draws, logit processors touch only the rows that ask, logprobs are the
model's own, and greedy verification keeps the drafts the target agrees with."""
from __future__ import annotations

import torch

from backends.engine.core.sampler import launch_sample, sample_on_device, verify
from backends.engine.core.sequence import SamplingParams, Sequence

VOCAB = 32


def _logits(rows: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, VOCAB, generator=torch.Generator().manual_seed(seed))


def _seq(**params) -> Sequence:
    return Sequence([1, 2, 3], SamplingParams(**params))


def test_temperature_zero_takes_the_argmax_beside_sampled_rows():
    logits = _logits(3)
    seqs = [_seq(temperature=0.0), _seq(temperature=1.0, seed=1), _seq(temperature=0.0)]
    tokens = sample_on_device(seqs, logits)
    assert tokens[0] == logits[0].argmax() and tokens[2] == logits[2].argmax()
    assert torch.equal(sample_on_device([seqs[0], seqs[2]], logits[[0, 2]]), logits[[0, 2]].argmax(-1))


def test_top_k_and_top_p_restrict_what_a_request_can_draw():
    logits = _logits(1).expand(300, VOCAB)  # one request's row, drawn 300 times from its generator
    top2 = set(logits[0].topk(2).indices.tolist())
    top_k = _seq(temperature=1.0, top_k=2, seed=3)
    assert set(sample_on_device([top_k] * 300, logits).tolist()) == top2

    peaked = torch.zeros(300, VOCAB)
    peaked[:, 5] = 4.0  # token 5 alone holds more than half the mass
    assert set(sample_on_device([_seq(temperature=1.0, top_p=0.5, seed=3)] * 300, peaked).tolist()) == {5}
    assert len(set(sample_on_device([_seq(temperature=1.0, seed=3)] * 300, peaked).tolist())) > 2


def test_a_seed_repeats_its_draws_and_another_seed_does_not():
    logits = _logits(1).expand(40, VOCAB)

    def draws(seed: int) -> list[int]:
        return sample_on_device([_seq(temperature=1.0, seed=seed)] * 40, logits).tolist()

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)


def test_logit_bias_and_penalties_touch_only_their_rows_and_not_the_models_logits():
    logits = _logits(2)
    before = logits.clone()
    worst = int(logits[0].argmin())
    biased = _seq(temperature=0.0, logit_bias={worst: 100.0})
    tokens = sample_on_device([biased, _seq(temperature=0.0)], logits)
    assert tokens.tolist() == [worst, int(logits[1].argmax())]
    assert torch.equal(logits, before)

    repeated = int(logits[1].argmax())
    penalized = Sequence([repeated], SamplingParams(temperature=0.0, presence_penalty=2.0, frequency_penalty=2.0))
    penalized.append_token(repeated)
    assert sample_on_device([penalized], logits[[1]]).item() != repeated


def test_logprobs_are_the_models_own_for_the_rows_that_ask():
    logits = _logits(2)
    asking, silent = _seq(temperature=0.0, logprobs=2), _seq(temperature=0.0)
    tokens = launch_sample([asking, silent], logits).tokens()
    assert tokens == logits.argmax(-1).tolist()
    (token, chosen, top), = asking.logprobs
    expected = logits[0].log_softmax(-1)
    assert token == tokens[0] and abs(chosen - expected[token].item()) < 1e-5
    assert [t for t, _ in top] == expected.topk(2).indices.tolist()
    assert silent.logprobs == []


def test_greedy_verification_keeps_drafts_up_to_the_first_disagreement():
    logits = _logits(4)
    best = logits.argmax(-1).tolist()
    greedy = _seq(temperature=0.0)
    assert verify(greedy, logits, best[:3], None) == best  # all three agreed: plus the bonus token
    wrong = (best[1] + 1) % VOCAB
    assert verify(greedy, logits, [best[0], wrong, best[2]], None) == best[:2]  # the target's own second
