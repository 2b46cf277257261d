"""Turns a step's logits into tokens: plain sampling, or verification of draft tokens."""
from __future__ import annotations

import torch

from kernels.sampling import probabilities, sample
from kernels.speculative import verify_greedy, verify_sampled

from .sequence import Sequence


def _params_tensors(seqs: list[Sequence], repeats: list[int] | None = None):
    repeats = repeats or [1] * len(seqs)
    temperature = torch.tensor([s.params.temperature for s, r in zip(seqs, repeats) for _ in range(r)])
    top_k = torch.tensor([s.params.top_k for s, r in zip(seqs, repeats) for _ in range(r)])
    top_p = torch.tensor([s.params.top_p for s, r in zip(seqs, repeats) for _ in range(r)])
    return temperature, top_k, top_p


def request_probabilities(seq: Sequence, logits: torch.Tensor) -> torch.Tensor:
    """The request's sampling distribution at each row of `logits` [n, V]."""
    temperature, top_k, top_p = _params_tensors([seq], [logits.shape[0]])
    return probabilities(logits, temperature, top_k, top_p)


def sample_next(seqs: list[Sequence], logits: torch.Tensor) -> list[int]:
    """One token per sequence from logits [len(seqs), V]."""
    temperature, top_k, top_p = _params_tensors(seqs)
    return sample(logits, temperature, top_k, top_p, [s.generator for s in seqs]).tolist()


def verify(seq: Sequence, logits: torch.Tensor, draft: list[int], draft_probs: torch.Tensor | None) -> list[int]:
    """logits [k+1, V] at the sequence's next position and after each draft token."""
    if seq.params.temperature == 0:
        return verify_greedy(logits, draft)
    return verify_sampled(request_probabilities(seq, logits), draft, draft_probs, seq.generator)
