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

from .sampling import draw


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
    a point-mass proposer. Returns the accepted drafts plus one corrected or bonus token.
    All k acceptance tests run at once on the probabilities' device; one read of k booleans
    and one of the final token come back."""
    device, k = target_probs.device, len(draft)
    ids = torch.tensor(draft, dtype=torch.long, device=device)
    p = target_probs[torch.arange(k, device=device), ids]
    q = draft_probs[torch.arange(k, device=device), ids] if draft_probs is not None else torch.ones_like(p)
    u = torch.rand(k, generator=generator, device=generator.device if generator else device).to(device)
    accepted = (u * q <= p).tolist()  # u < p/q, without dividing by a tiny q
    n = accepted.index(False) if False in accepted else k
    if n == k:
        return draft + [int(draw(target_probs[k:], [generator])[0])]
    if draft_probs is not None:
        residual = (target_probs[n] - draft_probs[n]).clamp_min(0)
    else:
        residual = target_probs[n].index_fill(0, ids[n:n + 1], 0)
    # an all-zero residual happens only when p == q up to rounding: then p itself is the answer
    residual = torch.where(residual.sum() > 0, residual, target_probs[n])
    return draft[:n] + [int(draw(residual[None], [generator])[0])]
