"""How close a (quantized) model stays to its fp32 reference: perplexity and teacher-forced
argmax agreement, both through a plain HF forward rather than the engine's paged cache."""
from __future__ import annotations

import contextlib
import math


@contextlib.contextmanager
def stock_attention(model):
    """Run the engine's model through a plain HF forward (sdpa) instead of the paged cache."""
    from backends.engine.model.model_runner import ATTN_IMPLEMENTATION

    model.set_attn_implementation("sdpa")
    try:
        yield model
    finally:
        model.set_attn_implementation(ATTN_IMPLEMENTATION)


def perplexity(model, ids: list[int]) -> float:
    import torch

    with stock_attention(model), torch.inference_mode():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    return math.exp(torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:])).item())


def teacher_forced_agreement(model, prompts: list[list[int]], reference: list[list[int]]) -> float:
    """Share of positions on the reference (fp32 greedy) path where the model's argmax is the
    reference token: per-step quality, without one near-tie changing every later context."""
    import torch

    same = 0
    with stock_attention(model), torch.inference_mode():
        for prompt, out in zip(prompts, reference):
            logits = model(torch.tensor([prompt + out])).logits[0, len(prompt) - 1:-1]
            same += (logits.argmax(-1) == torch.tensor(out)).sum().item()
    return same / sum(map(len, reference))
