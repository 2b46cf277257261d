"""Exact speculative-sampling verification (Leviathan et al. / Chen et al.).

Draft token d_i, drawn from the draft distribution q_i, is accepted with probability
min(1, p_i(d_i) / q_i(d_i)) where p_i is the target's distribution at that position. At
the first rejection the replacement is drawn from normalize(max(0, p_i − q_i)); if every
draft is accepted, a bonus token is drawn from the target's next distribution. The output
is then distributed exactly as sampling from the target alone. A proposer without a
distribution (n-gram lookup) is a point mass: q_i(d_i) = 1.
"""
from __future__ import annotations

import torch


def verify_greedy(target_logits: torch.Tensor, draft: list[int]) -> list[int]:
    """target_logits [k+1, V]. Accept drafts while they equal the target's argmax; then the
    target's own token. The result equals plain greedy decoding token for token."""
    best = target_logits.argmax(dim=-1).tolist()
    out: list[int] = []
    for i, token in enumerate(draft):
        if token != best[i]:
            return out + [best[i]]
        out.append(token)
    return out + [best[len(draft)]]


def verify_sampled(target_probs: torch.Tensor, draft: list[int], draft_probs: torch.Tensor | None,
                   generator: torch.Generator | None = None) -> list[int]:
    """target_probs [k+1, V] (after temperature/top-k/top-p), draft_probs [k, V] or None for
    a point-mass proposer. Returns the accepted drafts plus one corrected or bonus token."""
    out: list[int] = []
    for i, token in enumerate(draft):
        p = target_probs[i, token]
        q = draft_probs[i, token] if draft_probs is not None else torch.tensor(1.0)
        if torch.rand((), generator=generator) * q <= p:  # u < p/q, without dividing by a tiny q
            out.append(token)
            continue
        if draft_probs is not None:
            residual = (target_probs[i] - draft_probs[i]).clamp_min(0)
        else:
            residual = target_probs[i].clone()
            residual[token] = 0
        if residual.sum() <= 0:  # only when p == q up to rounding: then p itself is the answer
            residual = target_probs[i]
        replacement = torch.multinomial(residual / residual.sum(), 1, generator=generator)
        return out + [int(replacement)]
    bonus = torch.multinomial(target_probs[len(draft)], 1, generator=generator)
    return out + [int(bonus)]
