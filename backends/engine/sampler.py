"""Turns a step's logits into tokens: plain sampling, or verification of draft tokens.

Before the draw, rows that need it get their logit processors: penalties, logit_bias and
the grammar's token bitmask. Rows that need none are left untouched, so plain greedy
output is exactly what it was without these features.
"""
from __future__ import annotations

import torch

from kernels.sampling import apply_penalties, apply_token_bitmask, probabilities, sample, top_logprobs
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


def _process(seqs: list[Sequence], logits: torch.Tensor, grammars) -> torch.Tensor:
    """Penalties, logit_bias and grammar masks, only on the rows that ask for them."""
    for i, seq in enumerate(seqs):
        p = seq.params
        if p.has_penalties:
            logits[i] = apply_penalties(logits[i], torch.tensor(seq.token_ids), torch.tensor(seq.output_ids),
                                        p.presence_penalty, p.frequency_penalty, p.repetition_penalty)
        if p.logit_bias:
            ids = torch.tensor([t for t in p.logit_bias if t < logits.shape[1]], dtype=torch.long)
            logits[i, ids] += torch.tensor([p.logit_bias[int(t)] for t in ids])
    constrained = [i for i, seq in enumerate(seqs) if seq.matcher is not None]
    if constrained:
        bitmask = grammars.fill_bitmask([seqs[i].matcher for i in constrained])
        logits[constrained] = apply_token_bitmask(logits[constrained], bitmask)
    return logits


def _record_logprobs(seqs: list[Sequence], raw: torch.Tensor, tokens: list[int]) -> None:
    wanted = [i for i, seq in enumerate(seqs) if seq.params.logprobs is not None]
    if not wanted:
        return
    k = max(seqs[i].params.logprobs for i in wanted)
    chosen, values, ids = top_logprobs(raw[wanted], torch.tensor([tokens[i] for i in wanted]), k)
    for row, i in enumerate(wanted):
        top = list(zip(ids[row].tolist(), values[row].tolist()))[:seqs[i].params.logprobs]
        seqs[i].logprobs.append((tokens[i], float(chosen[row]), top))


def sample_next(seqs: list[Sequence], logits: torch.Tensor, grammars=None) -> list[int]:
    """One token per sequence from logits [len(seqs), V]. Log-probabilities, where asked
    for, are of the model's own distribution (before penalties, bias, grammar and temperature)."""
    raw = logits
    if not all(seq.params.is_plain for seq in seqs):
        logits = _process(seqs, logits.clone(), grammars)
    temperature, top_k, top_p = _params_tensors(seqs)
    tokens = sample(logits, temperature, top_k, top_p, [s.generator for s in seqs]).tolist()
    for i, seq in enumerate(seqs):  # a constrained answer about to run out of tokens gets its ending instead
        if seq.guard is not None:
            tokens[i] = seq.guard.choose(tokens[i], seq.params.max_tokens - seq.num_output_tokens,
                                         tokens[i] in seq.stop_ids)
    _record_logprobs(seqs, raw, tokens)
    return tokens


def verify(seq: Sequence, logits: torch.Tensor, draft: list[int], draft_probs: torch.Tensor | None) -> list[int]:
    """logits [k+1, V] at the sequence's next position and after each draft token."""
    if seq.params.temperature == 0:
        return verify_greedy(logits, draft)
    return verify_sampled(request_probabilities(seq, logits), draft, draft_probs, seq.generator)
