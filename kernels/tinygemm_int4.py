"""aten's CUDA int4 weight-only GEMM ("tinygemm", the kernel gpt-fast and torchao use on sm80+).

Our int4 format is already tinygemm's: codes 0..15 [n, k], bf16 (scale, zero) pairs
[k / group, n, 2], `w = (q - 8) * scale + zero`. Two aten calls run it:

- `_convert_weight_to_int4pack(uint8 [n, k / 2], inner_k_tiles)`: packs the codes into the
  tensor-core tile layout (an opaque int32 tensor). Its input holds weight 2j in the HIGH
  nibble of byte j and weight 2j + 1 in the low one (the reverse of our Triton packing).
- `_weight_int4pack_mm(x bf16 [m, k] contiguous, packed, group, scales_and_zeros)` -> bf16 [m, n].

What they take (aten/src/ATen/native/cuda/int4mm.cu): an NVIDIA GPU of compute capability 8.0
or newer, bf16 activations, groups of 32 to 256, n a multiple of 8 (the packed tensor has n / 8
tiles and the scales must have exactly n columns), k a multiple of 16 * inner_k_tiles with
inner_k_tiles 2, 4 or 8. Layers outside that stay on the Triton kernel (quantize.int4_kernel).

`OPS` is the pair that runs; tests on CPU put a stand-in with the same contract in its place.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

GROUPS = (32, 64, 128, 256)
N_MULTIPLE = 8
K_TILE = 16
INNER_K_TILES = (8, 4, 2)  # the most k tiles per load that k allows: 8 is gpt-fast's choice
MIN_CAPABILITY = (8, 0)  # the kernel uses sm80 tensor-core instructions
DTYPE = torch.bfloat16


@dataclass(frozen=True)
class Ops:
    convert: Callable[[torch.Tensor, int], torch.Tensor]  # uint8 [n, k / 2], inner_k_tiles -> packed
    mm: Callable[[torch.Tensor, torch.Tensor, int, torch.Tensor], torch.Tensor]  # x, packed, group, sz -> y


def _aten_ops() -> Ops:
    return Ops(torch.ops.aten._convert_weight_to_int4pack, torch.ops.aten._weight_int4pack_mm)


OPS: Ops | None = None  # None: aten's, looked up on first use


def ops() -> Ops:
    return OPS or _aten_ops()


def capability(device: torch.device) -> tuple[int, int] | None:
    """The NVIDIA compute capability of a CUDA device; None elsewhere (ROCm builds pack their
    tiles differently and need CDNA2: they keep the Triton kernel)."""
    if device.type != "cuda" or torch.version.hip or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability(device)


def inner_k_tiles(in_features: int) -> int | None:
    return next((t for t in INNER_K_TILES if in_features % (t * K_TILE) == 0), None)


def takes(out_features: int, in_features: int, group_size: int, dtype: torch.dtype) -> bool:
    """Whether a layer of this shape and activation dtype fits the kernel (the device aside)."""
    return dtype == DTYPE and group_size in GROUPS and out_features % N_MULTIPLE == 0 \
        and in_features % group_size == 0 and inner_k_tiles(in_features) is not None


def runs_on(device: torch.device) -> bool:
    found = capability(torch.device(device))
    return found is not None and found >= MIN_CAPABILITY


def pack_high_nibble_first(codes: torch.Tensor) -> torch.Tensor:
    """int codes 0..15 [n, k] -> uint8 [n, k / 2], even k in the high nibble (the converter's input)."""
    c = codes.to(torch.uint8)
    return ((c[:, 0::2] << 4) | c[:, 1::2]).contiguous()


def pack(codes: torch.Tensor) -> torch.Tensor:
    """Codes [n, k] on the GPU -> the kernel's packed weights."""
    n, k = codes.shape
    tiles = inner_k_tiles(k)
    if tiles is None or n % N_MULTIPLE:
        raise ValueError(f"int4 weights [{n}, {k}] do not fit tinygemm: out_features must be a multiple of "
                         f"{N_MULTIPLE} and in_features of {K_TILE * INNER_K_TILES[-1]}")
    return ops().convert(pack_high_nibble_first(codes), tiles)


def tinygemm_int4_linear(x: torch.Tensor, packed: torch.Tensor, scales_and_zeros: torch.Tensor, group_size: int,
                         out_features: int) -> torch.Tensor:
    """x [..., k] -> [..., n] in x's dtype, no bias. The kernel takes bf16 only: other
    activations go through it in bf16 (the scales are bf16 already) and come back in their dtype."""
    flat = x.reshape(-1, x.shape[-1]).to(DTYPE).contiguous()
    if flat.shape[0] == 0:  # no rows: nothing to launch
        return x.new_empty(*x.shape[:-1], out_features)
    out = ops().mm(flat, packed, group_size, scales_and_zeros)
    return out.to(x.dtype).reshape(*x.shape[:-1], out_features)
