"""The fused kernel set's signatures in plain torch: what a fused model runs on CPU, and the
reference the Triton kernels (kernels/triton_fused.py) are held to. Each follows HF's module
step for step (Llama's RMSNorm, SiLU then product, rotate_half), including where HF rounds to
the model's dtype, so a fused model on these is HF's numbers with fewer modules."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    wide = x.float()
    normed = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    total = residual + x
    return rms_norm(total, weight, eps), total


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up


def rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """q/k [..., tokens, heads, D], cos/sin [..., tokens, D]."""
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)

    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


@dataclass(frozen=True)
class FusedOps:
    """One kernel set for a fused model (backends/engine/model/fusion.py)."""
    name: str
    rms_norm: Callable
    add_rms_norm: Callable
    silu_and_mul: Callable
    rotary: Callable


TORCH_OPS = FusedOps("torch", rms_norm, add_rms_norm, silu_and_mul, rotary)


def triton_ops() -> FusedOps:
    from kernels import triton_fused  # triton is imported only where it runs

    return FusedOps("triton", triton_fused.rms_norm, triton_fused.add_rms_norm, triton_fused.silu_and_mul,
                    triton_fused.rotary)
