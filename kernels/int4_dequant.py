"""int4 weights dequantized to bf16 (or another float dtype), then one plain matmul: for prompt
chunks and other large row counts, where the tensor cores' GEMM does the work and the int4
read is a small part of it. Pure torch, so it runs on CPU too (the tests' reference path).

It reads the packing our Triton kernels read too (`pack_int4_along_k`): codes
two per byte along k, uint8 [n, k / 2], weight 2j in the low nibble of byte j; scales and zeros
bf16 [k / group, n, 2] with w = (q - 8) * scale + zero.
"""
from __future__ import annotations

import torch

DTYPE = torch.bfloat16


def pack_int4_along_k(codes: torch.Tensor) -> torch.Tensor:
    """int codes 0..15 [n, k] -> uint8 [n, k / 2], even k in the low nibble."""
    if codes.shape[1] % 2:
        raise ValueError(f"in_features {codes.shape[1]} must be even to pack two codes per byte")
    c = codes.to(torch.uint8)
    return (c[:, 0::2] | (c[:, 1::2] << 4)).contiguous()


def dequantize_along_k(packed: torch.Tensor, scales_and_zeros: torch.Tensor, group_size: int,
                       dtype: torch.dtype = DTYPE) -> torch.Tensor:
    """uint8 [n, k / 2] -> weights [n, k] in `dtype`: codes 0..15 and (q - 8) are exact in bf16,
    so the one rounding is the multiply-add by the group's scale and zero."""
    n, half = packed.shape
    k = 2 * half
    codes = torch.stack((packed & 0xF, packed >> 4), dim=-1).view(n, k // group_size, group_size)
    scale, zero = (part.t().to(dtype).contiguous()[..., None] for part in scales_and_zeros.unbind(-1))  # [n, k / g, 1]
    return torch.addcmul(zero, codes.to(dtype) - 8, scale).view(n, k)


def dequant_int4_linear(x: torch.Tensor, packed: torch.Tensor, scales_and_zeros: torch.Tensor,
                        group_size: int) -> torch.Tensor:
    """x [..., k] -> [..., n] in x's dtype, no bias: bf16 activations times the bf16 weights, as
    tinygemm multiplies (so the kernels of one layer agree at every row count)."""
    weight = dequantize_along_k(packed, scales_and_zeros, group_size)
    return torch.nn.functional.linear(x.to(DTYPE), weight).to(x.dtype)
