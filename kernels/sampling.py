"""Token sampling: greedy, temperature, top-k, top-p, with per-request generators.

`probabilities` is kept separate from the draw so speculative decoding can reuse the
exact same distribution for its rejection test.
"""
from __future__ import annotations

import torch


def probabilities(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor,
                  top_p: torch.Tensor) -> torch.Tensor:
    """logits [B, V] -> probs [B, V] after temperature, top-k (0 = off), top-p (1 = off).
    Rows with temperature 0 must be handled by the caller (greedy)."""
    logits = logits.float() / temperature.clamp_min(1e-5)[:, None]
    vocab = logits.shape[-1]
    if bool((top_k > 0).any()):
        k = torch.where(top_k > 0, top_k.clamp(max=vocab), vocab)
        kth = torch.topk(logits, int(k.max()), dim=-1).values.gather(1, (k - 1)[:, None])
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if bool((top_p < 1.0).any()):
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        sorted_probs = sorted_logits.softmax(dim=-1)
        # Drop a token when the mass strictly before it already reaches top_p; the top token always stays.
        drop = (sorted_probs.cumsum(dim=-1) - sorted_probs) >= top_p[:, None]
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.empty_like(logits).scatter_(1, order, sorted_logits)
    return logits.softmax(dim=-1)


def draw(probs: torch.Tensor, generators: list[torch.Generator | None]) -> torch.Tensor:
    """One sample per row; rows with their own generator (seeded requests) draw from it."""
    out = torch.empty(probs.shape[0], dtype=torch.long)
    shared = [i for i, g in enumerate(generators) if g is None]
    if shared:
        out[shared] = torch.multinomial(probs[shared], 1).view(-1)
    for i, gen in enumerate(generators):
        if gen is not None:
            out[i] = torch.multinomial(probs[i], 1, generator=gen)[0]
    return out


def sample(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor,
           generators: list[torch.Generator | None]) -> torch.Tensor:
    """logits [B, V] -> token ids [B]; temperature 0 means greedy."""
    tokens = logits.argmax(dim=-1)
    stochastic = (temperature > 0).nonzero().view(-1).tolist()
    if stochastic:
        probs = probabilities(logits[stochastic], temperature[stochastic], top_k[stochastic], top_p[stochastic])
        tokens[stochastic] = draw(probs, [generators[i] for i in stochastic])
    return tokens


_BITS = torch.arange(32, dtype=torch.int32)


def apply_token_bitmask(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """logits [B, V], bitmask [B, ceil(V'/32)] int32 (bit t set = token t allowed) -> masked logits.
    Tokens past the mask's width are disallowed."""
    allowed = ((bitmask.unsqueeze(-1) >> _BITS) & 1).view(bitmask.shape[0], -1).bool()
    vocab = logits.shape[-1]
    if allowed.shape[1] < vocab:
        allowed = torch.nn.functional.pad(allowed, (0, vocab - allowed.shape[1]))
    return logits.masked_fill(~allowed[:, :vocab], float("-inf"))


def apply_penalties(logits: torch.Tensor, context_ids: torch.Tensor, output_ids: torch.Tensor,
                    presence: float, frequency: float, repetition: float) -> torch.Tensor:
    """One row [V]. OpenAI's presence/frequency penalties count the generated tokens;
    the HF/vLLM repetition penalty covers prompt and output (divide positive logits, multiply
    negative ones)."""
    logits = logits.clone()
    if repetition != 1.0 and context_ids.numel():
        seen = torch.unique(context_ids)
        picked = logits[seen]
        logits[seen] = torch.where(picked > 0, picked / repetition, picked * repetition)
    if (presence or frequency) and output_ids.numel():
        counts = torch.bincount(output_ids, minlength=logits.shape[-1])[:logits.shape[-1]].to(logits.dtype)
        logits -= frequency * counts + presence * (counts > 0).to(logits.dtype)
    return logits


def top_logprobs(logits: torch.Tensor, chosen: torch.Tensor, k: int):
    """Log-probabilities of the model's distribution: (chosen [B], top values [B, k], top ids [B, k])."""
    logprobs = logits.float().log_softmax(dim=-1)
    values, ids = torch.topk(logprobs, k, dim=-1) if k else (logprobs[:, :0], chosen[:, None][:, :0])
    return logprobs.gather(1, chosen[:, None])[:, 0], values, ids
