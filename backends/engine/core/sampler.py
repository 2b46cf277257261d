"""Turns a step's logits into tokens: plain sampling, or verification of draft tokens.

Everything runs on the device that holds the logits; the chosen ids (and logprobs where asked)
come back to the host once per step, through `Sampled`, whose copy the host waits for only when it
needs the values (after launching the next step, where the engine runs one ahead). Before the draw, rows that need it get their logit processors:
penalties, logit_bias and the grammar's token bitmask. Rows that need none are left
untouched, so plain greedy output is exactly what it was without these features.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.sampling import (RowParams, apply_penalties, apply_token_bitmask, host_to_device, padded_ids,
                              probabilities, sample, select_rows, top_logprobs)
from kernels.speculative import verify_greedy, verify_sampled

from ..model.device import HostCopy
from .sequence import Sequence


def row_params(seqs: list[Sequence], device: torch.device, repeats: list[int] | None = None) -> RowParams:
    rows = [seq for seq, r in zip(seqs, repeats or [1] * len(seqs)) for _ in range(r)]
    return RowParams.build([s.params.temperature for s in rows], [s.params.top_k for s in rows],
                           [s.params.top_p for s in rows], [s.generator for s in rows], device)


def request_probabilities(seq: Sequence, logits: torch.Tensor) -> torch.Tensor:
    """The request's sampling distribution at each row of `logits` [n, V]."""
    return probabilities(logits, row_params([seq], logits.device, [logits.shape[0]]))


def _penalize(seqs: list[Sequence], logits: torch.Tensor) -> torch.Tensor:
    vocab, device = logits.shape[1], logits.device
    params = [s.params for s in seqs]
    return apply_penalties(logits, padded_ids([s.token_ids for s in seqs], vocab, device),
                           padded_ids([s.output_ids for s in seqs], vocab, device),
                           *(host_to_device(values, logits.dtype, device) for values in
                             ([p.presence_penalty for p in params], [p.frequency_penalty for p in params],
                              [p.repetition_penalty for p in params])))


def _process(seqs: list[Sequence], logits: torch.Tensor, grammars) -> torch.Tensor:
    """Penalties, logit_bias and grammar masks, only on the rows that ask for them."""
    device = logits.device
    penalized = [i for i, seq in enumerate(seqs) if seq.params.has_penalties]
    if penalized:
        logits.index_copy_(0, host_to_device(penalized, torch.long, device),
                           _penalize([seqs[i] for i in penalized], select_rows(logits, penalized)))
    bias = [(i, token, value) for i, seq in enumerate(seqs)
            for token, value in seq.params.logit_bias.items() if token < logits.shape[1]]
    if bias:
        rows, tokens, values = zip(*bias)
        logits.index_put_((host_to_device(rows, torch.long, device), host_to_device(tokens, torch.long, device)),
                          host_to_device(values, logits.dtype, device), accumulate=True)
    constrained = [i for i, seq in enumerate(seqs) if seq.matcher is not None]
    if constrained:  # llguidance fills the mask on the host; only the bits travel
        bitmask = grammars.fill_bitmask([seqs[i].matcher for i in constrained]).to(device, non_blocking=True)
        logits.index_copy_(0, host_to_device(constrained, torch.long, device),
                           apply_token_bitmask(select_rows(logits, constrained), bitmask))
    return logits


def sample_on_device(seqs: list[Sequence], logits: torch.Tensor, grammars=None) -> torch.Tensor:
    """Token ids [len(seqs)] on the logits' device, with no read back to the host."""
    if not all(seq.params.is_plain for seq in seqs):
        logits = _process(seqs, logits.clone(), grammars)
    if all(seq.params.temperature == 0 for seq in seqs):
        return logits.argmax(dim=-1)  # no per-row settings to build for an all-greedy step
    return sample(logits, row_params(seqs, logits.device))


@dataclass
class Sampled:
    """One step's sampled ids: `ids` on the device (the next decode step's input), and their
    copy, with the asked-for log-probabilities, on its way to the host."""
    seqs: list[Sequence]
    ids: torch.Tensor
    logits: torch.Tensor  # the model's own, for a row whose token the length guard replaces
    wanted: list[int]  # rows that asked for logprobs
    copy: HostCopy  # ids, then (chosen, top values, top ids) of the wanted rows

    def tokens(self) -> list[int]:
        """Waits for the ids; a constrained answer about to run out of tokens gets its ending instead."""
        drawn, *top = self.copy.values()
        tokens = list(drawn)
        for i, seq in enumerate(self.seqs):
            if seq.guard is not None:
                tokens[i] = seq.guard.choose(tokens[i], seq.params.max_tokens - seq.num_output_tokens,
                                             tokens[i] in seq.stop_ids)
        if self.wanted:
            self._record_logprobs(tokens, drawn, *top)
        return tokens

    def _record_logprobs(self, tokens: list[int], drawn: list[int], chosen, values, ids) -> None:
        for row, i in enumerate(self.wanted):
            seq = self.seqs[i]
            if tokens[i] != drawn[i]:  # the guard chose another token: its own logprob (rare, small)
                chosen[row] = HostCopy(*_top_logprobs(self.logits[[i]], [tokens[i]], 0)).values()[0][0]
            top = list(zip(ids[row], values[row]))[:seq.params.logprobs]
            seq.logprobs.append((tokens[i], float(chosen[row]), top))


def _top_logprobs(logits: torch.Tensor, chosen, k: int):
    chosen = chosen if isinstance(chosen, torch.Tensor) else host_to_device(chosen, torch.long, logits.device)
    return top_logprobs(logits, chosen, k)


def launch_sample(seqs: list[Sequence], logits: torch.Tensor, grammars=None) -> Sampled:
    """One token per sequence from logits [len(seqs), V], drawn on the device, with the read back
    started, not waited for. Log-probabilities, where asked for, are of the model's own
    distribution (before penalties, bias, grammar and temperature)."""
    ids = sample_on_device(seqs, logits, grammars)
    wanted = [i for i, seq in enumerate(seqs) if seq.params.logprobs is not None]
    top = ()
    if wanted:
        k = max(seqs[i].params.logprobs for i in wanted)
        top = _top_logprobs(select_rows(logits, wanted), select_rows(ids, wanted), k)
    return Sampled(seqs, ids, logits, wanted, HostCopy(ids, *top))


def verify(seq: Sequence, logits: torch.Tensor, draft: list[int], draft_probs: torch.Tensor | None) -> list[int]:
    """logits [k+1, V] at the sequence's next position and after each draft token."""
    if seq.params.temperature == 0:
        return verify_greedy(logits, draft)
    return verify_sampled(request_probabilities(seq, logits), draft, draft_probs, seq.generator)
