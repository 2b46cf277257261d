"""Weight-only int4 / int8 matmul for a few rows (decode steps) in Triton, on the formats of
kernels/triton_quantized_matmul.py (which sends inputs of up to GEMV_MAX_ROWS rows here).

A decode step reads every weight once for one or a few rows, so the job is bandwidth: enough
programs to keep every SM loading, and loads that walk memory in order. Hence:
- the grid is (row, column block, k split): k is cut into `split` ranges of whole groups so
  that a small N still makes about TARGET_PROGRAMS programs; each writes fp32 partial sums,
  added in a second pass (deterministic, unlike atomics). Rows are the fastest grid axis, so
  the programs of one weight tile run together and the rows after the first read it from L2;
- weight tiles are [BLOCK_N, k] with k contiguous, one byte load for both of its nibbles;
- a multiply-and-sum instead of tl.dot, which would pad a row to 16. For int4 the group's
  scale and zero factor out of its sum: sum((q - 8) * s + z) * x = s * sum((q - 8) * x) + z * sum(x).
Operands go to fp32 before multiplying, which also keeps Triton's interpreter right on bf16.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

GEMV_MAX_ROWS = 16
BLOCK_N = 64
INT4_ROW_BYTES = 64  # bytes of each weight row a program reads per loop step (whole groups)
INT8_BLOCK_K = 128
TARGET_PROGRAMS = 528  # programs a launch aims for: enough loads in flight to hide latency (docs/gpu.md)


@triton.jit
def _int4_gemv(x_ptr, w_ptr, sz_ptr, out_ptr, M, N, K, stride_xm, stride_wn, groups_per_split,
               GROUP: tl.constexpr, GROUPS_PER_STEP: tl.constexpr, BLOCK_N: tl.constexpr):
    row, split = tl.program_id(0), tl.program_id(2)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    HALF: tl.constexpr = GROUP // 2
    pair = tl.arange(0, HALF)  # byte j of a group holds its weights 2j (low nibble) and 2j + 1 (high)
    first = split * groups_per_split
    last = tl.minimum(first + groups_per_split, K // GROUP)
    x_row = x_ptr + row.to(tl.int64) * stride_xm
    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(first, last, GROUPS_PER_STEP):
        groups = start + tl.arange(0, GROUPS_PER_STEP)
        g_ok = groups < last
        k_even = groups[:, None] * GROUP + 2 * pair[None, :]  # [G, HALF]
        x_even = tl.load(x_row + k_even, mask=g_ok[:, None], other=0.0).to(tl.float32)
        x_odd = tl.load(x_row + k_even + 1, mask=g_ok[:, None], other=0.0).to(tl.float32)
        byte = offs_n[:, None, None].to(tl.int64) * stride_wn + groups[None, :, None] * HALF + pair[None, None, :]
        packed = tl.load(w_ptr + byte, mask=n_ok[:, None, None] & g_ok[None, :, None], other=0).to(tl.int32)
        low = (packed & 0xF).to(tl.float32) - 8.0
        high = ((packed >> 4) & 0xF).to(tl.float32) - 8.0
        sums = tl.sum(low * x_even[None, :, :] + high * x_odd[None, :, :], axis=2)  # [BLOCK_N, G]
        x_sums = tl.sum(x_even + x_odd, axis=1)  # [G]
        ok = n_ok[:, None] & g_ok[None, :]
        sz = sz_ptr + (groups[None, :] * N + offs_n[:, None]).to(tl.int64) * 2
        scale = tl.load(sz, mask=ok, other=0.0).to(tl.float32)
        zero = tl.load(sz + 1, mask=ok, other=0.0).to(tl.float32)
        acc += tl.sum(scale * sums + zero * x_sums[None, :], axis=1)
    tl.store(out_ptr + (split * M + row).to(tl.int64) * N + offs_n, acc, mask=n_ok)


@triton.jit
def _int8_gemv(x_ptr, w_ptr, s_ptr, out_ptr, M, N, K, stride_xm, stride_wn, blocks_per_split,
               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row, split = tl.program_id(0), tl.program_id(2)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    first = split * blocks_per_split * BLOCK_K
    last = tl.minimum(first + blocks_per_split * BLOCK_K, K)
    x_row = x_ptr + row.to(tl.int64) * stride_xm
    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(first, last, BLOCK_K):
        offs_k = start + tl.arange(0, BLOCK_K)
        k_ok = offs_k < last
        x = tl.load(x_row + offs_k, mask=k_ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :],
                    mask=n_ok[:, None] & k_ok[None, :], other=0).to(tl.float32)
        acc += tl.sum(w * x[None, :], axis=1)
    # the per-channel scale factors out of the k sum
    acc *= tl.load(s_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + (split * M + row).to(tl.int64) * N + offs_n, acc, mask=n_ok)


def split_k(rows: int, n: int, chunks: int) -> tuple[int, int]:
    """(splits, chunks per split): k's `chunks` (groups or k blocks) cut so that the grid has
    about TARGET_PROGRAMS programs, every split holding at least one chunk."""
    per = triton.cdiv(chunks, max(1, min(chunks, TARGET_PROGRAMS // (rows * triton.cdiv(n, BLOCK_N)))))
    return triton.cdiv(chunks, per), per


def _run(kernel, x: torch.Tensor, weight: torch.Tensor, scales: torch.Tensor, n: int, bias: torch.Tensor | None,
         chunks: int, **constants) -> torch.Tensor:
    """x [..., k] -> [..., n] in x's dtype: partial sums per k split, then their sum and the bias."""
    flat = x.reshape(-1, x.shape[-1]).contiguous()
    m, k = flat.shape
    if m == 0:
        return x.new_empty(*x.shape[:-1], n)
    splits, per = split_k(m, n, chunks)
    partial = torch.empty(splits, m, n, dtype=torch.float32, device=x.device)
    kernel[(m, triton.cdiv(n, BLOCK_N), splits)](flat, weight, scales, partial, m, n, k, flat.stride(0),
                                                 weight.stride(0), per, BLOCK_N=BLOCK_N, **constants)
    out = partial.sum(0)
    if bias is not None:
        out += bias.float()
    return out.to(x.dtype).reshape(*x.shape[:-1], n)


def int4_gemv(x: torch.Tensor, packed: torch.Tensor, scales_and_zeros: torch.Tensor, group_size: int,
              bias: torch.Tensor | None = None) -> torch.Tensor:
    """packed uint8 [n, k / 2] (even k in the low nibble), scales_and_zeros [k / group, n, 2]."""
    groups_per_step = max(1, 2 * INT4_ROW_BYTES // group_size)
    return _run(_int4_gemv, x, packed, scales_and_zeros, packed.shape[0], bias, x.shape[-1] // group_size,
                GROUP=group_size, GROUPS_PER_STEP=groups_per_step)


def int8_gemv(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
              bias: torch.Tensor | None = None) -> torch.Tensor:
    """codes int8 [n, k], scales [n]."""
    return _run(_int8_gemv, x, codes, scales, codes.shape[0], bias, triton.cdiv(x.shape[-1], INT8_BLOCK_K),
                BLOCK_K=INT8_BLOCK_K)
