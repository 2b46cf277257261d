"""Weight-only int8 / int4 matmul in Triton: the CUDA counterpart of kernels/quantized_linear.py.

Same formats and the same quantizers (quantize_int8 / quantize_int4 there); only the int4
packing differs, chosen here at load time because aten's CPU packing is opaque:

- int8: codes int8 `[n, k]`, scales `[n]` per output channel; `y = (x @ codes^T) * scales`.
- int4: codes 0..15 packed two per byte along k, uint8 `[n, k / 2]`: byte j of row r holds
  weight 2j in its low nibble and weight 2j + 1 in its high nibble (`pack_int4_along_k`).
  Scales and zeros stay in quantize_int4's `[k / group, n, 2]` layout; `w = (q - 8) * s + z`.

Inputs of up to GEMV_MAX_ROWS rows (decode steps) go to kernels/triton_quantized_gemv.py, made
for bandwidth (split k, k-contiguous loads, no tl.dot padding rows to 16); larger ones here.
One program computes a BLOCK_M x BLOCK_N tile of `y`, walking k one group at a time
(BLOCK_K = group size for int4), so every weight tile is dequantised in registers with one
scale and zero per output column and never written back as fp weights. Activations may be
fp32, bf16 or fp16; accumulation is fp32; the output has the activation's dtype.

Triton's interpreter (TRITON_INTERPRET=1, the CPU tests) multiplies bf16 operands as raw
uint16 bits (triton 3.9), so there the operands go up to fp32 before tl.dot, as in
kernels/triton_paged_attention.py; the tests run fp32 activations in the interpreter.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .int4_dequant import pack_int4_along_k  # noqa: F401  (the packing these kernels read; dequant reads it too)
from .triton_quantized_gemv import GEMV_MAX_ROWS, int4_gemv, int8_gemv

BLOCK_M = 16  # tl.dot needs every dimension >= 16; decode batches are small
BLOCK_N = 64
INT8_BLOCK_K = 64


@triton.jit
def _tile(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """This program's rows and columns of y, and which of them exist."""
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    return offs_m, offs_n, offs_m < M, offs_n < N


@triton.jit
def _finish(acc, b_ptr, y_ptr, offs_m, offs_n, m_ok, n_ok, stride_ym, HAS_BIAS: tl.constexpr):
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :],
             acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def _int8_kernel(x_ptr, w_ptr, s_ptr, b_ptr, y_ptr, M, N, K,
                 stride_xm, stride_wn, stride_ym,
                 HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 DOT_DTYPE: tl.constexpr, PRECISION: tl.constexpr):
    offs_m, offs_n, m_ok, n_ok = _tile(M, N, BLOCK_M, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for start in range(0, K, BLOCK_K):
        offs_k = start + tl.arange(0, BLOCK_K)
        k_ok = offs_k < K
        x = tl.load(x_ptr + offs_m[:, None].to(tl.int64) * stride_xm + offs_k[None, :],
                    mask=m_ok[:, None] & k_ok[None, :], other=0.0).to(DOT_DTYPE)
        w = tl.load(w_ptr + offs_n[None, :].to(tl.int64) * stride_wn + offs_k[:, None],
                    mask=n_ok[None, :] & k_ok[:, None], other=0).to(DOT_DTYPE)  # [BLOCK_K, BLOCK_N]
        acc += tl.dot(x, w, input_precision=PRECISION)
    # the per-channel scale factors out of the k sum: apply it once, after accumulating codes
    acc *= tl.load(s_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    _finish(acc, b_ptr, y_ptr, offs_m, offs_n, m_ok, n_ok, stride_ym, HAS_BIAS)


@triton.jit
def _int4_kernel(x_ptr, w_ptr, sz_ptr, b_ptr, y_ptr, M, N, K,
                 stride_xm, stride_wn, stride_ym,
                 HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP: tl.constexpr,
                 DOT_DTYPE: tl.constexpr, PRECISION: tl.constexpr):
    offs_m, offs_n, m_ok, n_ok = _tile(M, N, BLOCK_M, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for group in range(0, K // GROUP):
        offs_k = group * GROUP + tl.arange(0, GROUP)
        x = tl.load(x_ptr + offs_m[:, None].to(tl.int64) * stride_xm + offs_k[None, :],
                    mask=m_ok[:, None], other=0.0).to(DOT_DTYPE)
        # each byte is read for both of its nibbles; the second read hits the cache
        packed = tl.load(w_ptr + offs_n[None, :].to(tl.int64) * stride_wn + offs_k[:, None] // 2,
                         mask=n_ok[None, :], other=0).to(tl.int32)
        codes = (packed >> ((offs_k[:, None] % 2) * 4)) & 0xF  # [GROUP, BLOCK_N]
        sz = sz_ptr + (group * N + offs_n).to(tl.int64) * 2
        scale = tl.load(sz, mask=n_ok, other=0.0).to(tl.float32)
        zero = tl.load(sz + 1, mask=n_ok, other=0.0).to(tl.float32)
        w = (codes.to(tl.float32) - 8.0) * scale[None, :] + zero[None, :]
        acc += tl.dot(x, w.to(DOT_DTYPE), input_precision=PRECISION)
    _finish(acc, b_ptr, y_ptr, offs_m, offs_n, m_ok, n_ok, stride_ym, HAS_BIAS)


def _dot_args(dtype: torch.dtype) -> dict:
    """fp32 stays exact ("ieee"); bf16/fp16 go to tensor cores as they are, except in the
    interpreter, whose bf16 multiply is wrong (see the module docstring)."""
    if dtype == torch.float32 or triton.knobs.runtime.interpret:
        return dict(DOT_DTYPE=tl.float32, PRECISION="ieee")
    return dict(DOT_DTYPE={torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}[dtype], PRECISION="tf32")


def _launch(kernel, x: torch.Tensor, weight: torch.Tensor, scales: torch.Tensor, n: int,
            bias: torch.Tensor | None, **constants) -> torch.Tensor:
    """x [..., k] -> [..., n] in x's dtype."""
    flat = x.reshape(-1, x.shape[-1]).contiguous()
    m, k = flat.shape
    out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    kernel[grid](flat, weight, scales, bias if bias is not None else scales, out, m, n, k,
                 flat.stride(0), weight.stride(0), out.stride(0), HAS_BIAS=bias is not None,
                 BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, **constants, **_dot_args(x.dtype))
    return out.reshape(*x.shape[:-1], n)


def _few_rows(x: torch.Tensor) -> bool:
    return x.numel() <= GEMV_MAX_ROWS * x.shape[-1]


def triton_int8_linear(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
                       bias: torch.Tensor | None = None) -> torch.Tensor:
    """codes int8 [n, k], scales [n] (quantize_int8's output, on x's device)."""
    if _few_rows(x):
        return int8_gemv(x, codes.contiguous(), scales.contiguous(), bias)
    return _launch(_int8_kernel, x, codes.contiguous(), scales.contiguous(), codes.shape[0], bias,
                   BLOCK_K=INT8_BLOCK_K)


def triton_int4_linear(x: torch.Tensor, packed: torch.Tensor, scales_and_zeros: torch.Tensor, group_size: int,
                       bias: torch.Tensor | None = None) -> torch.Tensor:
    """packed uint8 [n, k / 2] (pack_int4_along_k), scales_and_zeros [k / group, n, 2]."""
    k = x.shape[-1]
    if k % group_size or packed.shape[1] * 2 != k:
        raise ValueError(f"input of {k} features does not fit int4 weights [{packed.shape[0]}, "
                         f"{packed.shape[1] * 2}] in groups of {group_size}")
    if _few_rows(x):
        return int4_gemv(x, packed, scales_and_zeros.contiguous(), group_size, bias)
    return _launch(_int4_kernel, x, packed, scales_and_zeros.contiguous(), packed.shape[0], bias, GROUP=group_size)
