"""Weight-only int8 and int4 linear layers: quantizers, pure-torch references, CPU kernels.

Formats (weights `[out_features, in_features]`, i.e. `[n, k]`, as nn.Linear stores them):

- int8: symmetric per output channel. `q = round(w / s)` in [-127, 127] with
  `s = max|w_row| / 127`; `w ≈ q * s`. Kernels: our C++ `int8_linear` for decode-sized
  inputs (cpu_kernels.py), `aten._weight_int8pack_mm(x, q, s)` for prompt chunks.
- int4: asymmetric per group of `group_size` consecutive input features. Codes `q` in
  [0, 15]; aten's convention stores `(scale, zero)` with `w ≈ (q - 8) * scale + zero`
  (so `zero` is the group's value at the mid code). Scales/zeros are laid out
  `[k / group_size, n, 2]`; the codes (int32 `[n, k]`) are packed once by
  `aten._convert_weight_to_int4pack_for_cpu` into an opaque `[n, k / 2]` uint8 layout.
  Kernels: our C++ `int4_linear` (cpu_kernels.py) on tiles that hold codes, scales and zeros in the
  order it reads them (`pack_int4_tiles`), for every row count, since it beats aten's at every
  row count measured (docs/engine-cpu.md); `aten._weight_int4pack_mm_for_cpu(x, packed,
  group_size, scales_and_zeros)` where our kernels do not build.

Both aten kernels are fast only with bf16 activations (docs/quantization.md), so the
fast path casts the input to bf16 and the output back to the caller's dtype. Scales are
stored in bf16 because the kernels take them in the activation dtype; the references
dequantize from those same bf16 values, so a test isolates the kernel's own error.
"""
from __future__ import annotations

import torch

from . import cpu_kernels

ACT_DTYPE = torch.bfloat16
# our int8 kernel re-reads the codes for every 4 rows: beyond this many rows (prompt chunks)
# aten's kernel serves, outside compiled graphs (a row test there would guard the batch size)
INT8_KERNEL_MAX_ROWS = 16
INT4_N_MULTIPLE = 16  # the CPU int4 packer requires out_features divisible by 16


# --- int8, per output channel -------------------------------------------------------------

def quantize_int8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (codes int8 [n, k], scales bf16 [n])."""
    w = weight.detach().float()
    scales = (w.abs().amax(dim=1) / 127).clamp(min=1e-8).to(ACT_DTYPE)
    codes = torch.round(w / scales.float()[:, None]).clamp(-127, 127).to(torch.int8)
    return codes, scales


def dequantize_int8(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    return codes.float() * scales.float()[:, None]


def int8_linear_reference(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
                          bias: torch.Tensor | None = None) -> torch.Tensor:
    return torch.nn.functional.linear(x.float(), dequantize_int8(codes, scales), bias)


def int8_linear(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
                bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., k] -> [..., n] in x's dtype. Decode-sized inputs (and every compiled step) go
    through our C++ kernel (cpu_kernels.int8_linear: int16 activations, exact int32 sums), when
    built; prompt chunks and the fallback through aten's kernel on bf16 activations."""
    flat = x.reshape(-1, x.shape[-1])
    if x.device.type == "cpu" and codes.shape[1] <= cpu_kernels.MAX_IN_FEATURES and cpu_kernels.available() \
            and (torch.compiler.is_compiling() or flat.shape[0] <= INT8_KERNEL_MAX_ROWS):
        out = cpu_kernels.int8_linear(flat, codes, scales).to(x.dtype)
    else:
        out = torch.ops.aten._weight_int8pack_mm(flat.to(ACT_DTYPE), codes, scales).to(x.dtype)
    if bias is not None:
        out = out + bias
    return out.reshape(*x.shape[:-1], codes.shape[0])


# --- int4, group-wise -----------------------------------------------------------------------

def quantize_int4(weight: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (codes int32 [n, k] in 0..15, scales_and_zeros bf16 [k / group_size, n, 2])."""
    n, k = weight.shape
    if k % group_size:
        raise ValueError(f"in_features {k} is not a multiple of the group size {group_size}")
    groups = weight.detach().float().reshape(n, k // group_size, group_size)
    low = groups.amin(dim=-1, keepdim=True)
    high = groups.amax(dim=-1, keepdim=True)
    scales = ((high - low) / 15).clamp(min=1e-6).to(ACT_DTYPE).float()
    zeros = (low + 8 * scales).to(ACT_DTYPE).float()
    # round against the bf16-rounded scale/zero the kernel will use, so codes fit them best
    codes = ((groups - zeros) / scales + 8).round_().clamp_(0, 15).to(torch.int32).reshape(n, k)
    scales_and_zeros = torch.stack([scales[..., 0], zeros[..., 0]], dim=-1).transpose(0, 1).contiguous()
    return codes, scales_and_zeros.to(ACT_DTYPE)


def dequantize_int4(codes: torch.Tensor, scales_and_zeros: torch.Tensor, group_size: int) -> torch.Tensor:
    n, k = codes.shape
    sz = scales_and_zeros.float().transpose(0, 1)  # [n, k / g, 2]
    groups = codes.float().reshape(n, k // group_size, group_size)
    return ((groups - 8) * sz[..., 0:1] + sz[..., 1:2]).reshape(n, k)


def pack_int4(codes: torch.Tensor) -> torch.Tensor:
    """int32 codes [n, k] -> the CPU kernel's packed uint8 [n, k / 2] (layout is aten's)."""
    if codes.shape[0] % INT4_N_MULTIPLE:
        raise ValueError(f"out_features {codes.shape[0]} is not a multiple of {INT4_N_MULTIPLE}")
    return torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes.contiguous(), 1)


INT4_TILE_ROWS = 4  # output rows per tile of our C++ kernel's layout


def scales_and_mins(scales_and_zeros: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """aten's (scale, zero) [k / group, n, 2] -> fp32 (scale, min) [n, k / group], w = q * scale + min."""
    sz = scales_and_zeros.float().transpose(0, 1)
    return sz[..., 0].contiguous(), (sz[..., 1] - 8 * sz[..., 0]).contiguous()


def scales_and_zeros_of(scales: torch.Tensor, mins: torch.Tensor) -> torch.Tensor:
    """scales_and_mins' inverse: fp32 (scale, min) [n, k / group] -> bf16 (scale, zero) [k / group, n, 2]."""
    return torch.stack([scales, mins + 8 * scales], dim=-1).transpose(0, 1).contiguous().to(ACT_DTYPE)


def pack_int4_tiles(codes: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor, group_size: int) -> torch.Tensor:
    """int32 codes [n, k] with w = q * scale + min, scales and mins [n, k / group] -> our C++
    kernel's uint8 tiles [n / 4, k / group, 2 * group + 16]: per 4 output rows and group, the
    rows' codes sub-block by sub-block (16 bytes hold 32 codes of a row, code j in the low nibble
    of byte j and code 16 + j in its high nibble, GGUF's Q4_1 order), each sub-block as two halves
    of 8 bytes with the 4 rows' halves side by side, then the 4 rows' fp16 (scale, min) pairs: a
    Q4_1 block's own d and m, exactly. The kernel reads one stream of bytes, in order."""
    n, k = codes.shape
    if n % INT4_TILE_ROWS or k % group_size or group_size % 32:
        raise ValueError(f"int4 tiles need out_features % {INT4_TILE_ROWS} == 0 and in_features % group_size == 0 "
                         f"with groups of a multiple of 32, got [{n}, {k}] with groups of {group_size}")
    groups, per_group = k // group_size, group_size // 32
    sub = codes.to(torch.uint8).reshape(n, k // 32, 2, 16)
    nibbles = (sub[:, :, 0] | (sub[:, :, 1] << 4)).reshape(n // 4, 4, groups, per_group, 2, 8)
    nibbles = nibbles.permute(0, 2, 3, 4, 1, 5).reshape(n // 4, groups, per_group * 64)
    pairs = torch.stack([scales, mins], dim=-1).to(torch.float16).view(torch.uint8)  # [n, groups, 4]
    pairs = pairs.reshape(n // 4, 4, groups, 4).permute(0, 2, 1, 3).reshape(n // 4, groups, 16)
    return torch.cat([nibbles, pairs], dim=-1).contiguous()


def unpack_int4_tiles(tiles: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """pack_int4_tiles' inverse: -> (codes int32 [n, k], scales fp32 [n, k / group], mins fp32 [n, k / group])."""
    blocks, groups = tiles.shape[:2]
    per_group, n = group_size // 32, blocks * INT4_TILE_ROWS
    nibbles = tiles[..., :per_group * 64].reshape(blocks, groups, per_group, 2, 4, 8).permute(0, 4, 1, 2, 3, 5)
    nibbles = nibbles.reshape(blocks, 4, groups, per_group, 16)
    codes = torch.stack([nibbles & 15, nibbles >> 4], dim=-2).reshape(n, groups * group_size).to(torch.int32)
    pairs = tiles[..., per_group * 64:].reshape(blocks, groups, 4, 4).permute(0, 2, 1, 3).reshape(n, groups, 4)
    pairs = pairs.contiguous().view(torch.float16).float()
    return codes, pairs[..., 0].contiguous(), pairs[..., 1].contiguous()


def dequantize_int4_tiles(tiles: torch.Tensor, group_size: int) -> torch.Tensor:
    """The fp32 weights [n, k] that tiles hold."""
    codes, scales, mins = unpack_int4_tiles(tiles, group_size)
    n, k = codes.shape
    groups = codes.float().reshape(n, k // group_size, group_size)
    return (groups * scales[..., None] + mins[..., None]).reshape(n, k)


def int4_linear_reference(x: torch.Tensor, codes: torch.Tensor, scales_and_zeros: torch.Tensor, group_size: int,
                          bias: torch.Tensor | None = None) -> torch.Tensor:
    return torch.nn.functional.linear(x.float(), dequantize_int4(codes, scales_and_zeros, group_size), bias)


def int4_linear(x: torch.Tensor, packed: torch.Tensor, scales_and_zeros: torch.Tensor, group_size: int,
                bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., k] -> [..., n] in x's dtype, through the aten int4 kernel on bf16 activations."""
    flat = x.reshape(-1, x.shape[-1]).to(ACT_DTYPE)
    out = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, packed, group_size, scales_and_zeros).to(x.dtype)
    if bias is not None:
        out = out + bias
    return out.reshape(*x.shape[:-1], packed.shape[0])


def int4_tile_linear(x: torch.Tensor, tiles: torch.Tensor, group_size: int,
                     bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., k] -> [..., n] in x's dtype, through our C++ kernel (cpu_kernels.int4_linear)."""
    flat = x.reshape(-1, x.shape[-1])
    out = cpu_kernels.int4_linear(flat, tiles, group_size).to(x.dtype)
    if bias is not None:
        out = out + bias
    return out.reshape(*x.shape[:-1], tiles.shape[0] * INT4_TILE_ROWS)


# --- GGUF Q4_1 blocks, mapped onto the int4 format with their codes unchanged ----------------
# A Q4_1 block holds 32 consecutive weights of one row: fp16 scale d, fp16 minimum m, then 16
# bytes of nibbles (low nibbles are weights 0-15, high nibbles 16-31); w = d * q + m. Since
# d * q + m = (q - 8) * d + (m + 8 * d), a block is an int4 group of 32 with scale d and zero
# m + 8d: the codes carry over exactly; only d and the zero are held in bf16 for the kernel.

Q4_1_GROUP = 32
Q4_1_BLOCK_BYTES = 20


def split_q4_1(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """uint8 [n, k / 32 * 20] -> (codes int32 [n, k], d fp32 [n, k / 32], m fp32 [n, k / 32])."""
    n = blocks.shape[0]
    b = blocks.reshape(n, -1, Q4_1_BLOCK_BYTES)
    d = b[..., 0:2].contiguous().view(torch.float16)[..., 0].float()
    m = b[..., 2:4].contiguous().view(torch.float16)[..., 0].float()
    nibbles = b[..., 4:]
    codes = torch.cat([nibbles & 15, nibbles >> 4], dim=-1).to(torch.int32)
    return codes.reshape(n, -1), d, m


def dequantize_q4_1(blocks: torch.Tensor) -> torch.Tensor:
    """The fp32 weights a Q4_1 tensor stands for, computed as llama.cpp and gguf-py do."""
    codes, d, m = split_q4_1(blocks)
    n = codes.shape[0]
    groups = codes.float().reshape(n, -1, Q4_1_GROUP)
    return (d[..., None] * groups + m[..., None]).reshape(n, -1)


def q4_1_to_int4(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (codes int32 [n, k] exactly the GGUF's, scales_and_zeros bf16 [k / 32, n, 2])."""
    codes, d, m = split_q4_1(blocks)
    scales_and_zeros = torch.stack([d, m + 8 * d], dim=-1).transpose(0, 1).contiguous()
    return codes, scales_and_zeros.to(ACT_DTYPE)
