"""Fused elementwise kernels in Triton for a decoder layer: RMSNorm, residual add + RMSNorm,
SiLU-and-mul on a merged gate|up output, and rotary on q and k. The torch reference set with the
same signatures is kernels/fused_reference.py; backends/engine/model/fusion.py routes a model to either.

Each kernel reads and writes the model's dtype and computes in fp32. Where HF rounds an
intermediate to the model's dtype (the normed activations before the weight, SiLU before the
product), the kernels round there too, so bf16 outputs match HF's modules, not only fp32 math.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

COLUMNS = 1024  # SiLU-and-mul columns per program: intermediate sizes reach tens of thousands


@triton.jit
def _norm_row(x, w_ptr, out_ptr, cols, mask, n, eps):
    """x: one row in fp32 (zeros past n). HF: weight * (x * rsqrt(mean(x^2) + eps)).to(dtype)."""
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n + eps)
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    return (w * normed).to(out_ptr.dtype.element_ty)


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, stride_x, stride_out, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, _norm_row(x, w_ptr, out_ptr, cols, mask, n, eps), mask=mask)


@triton.jit
def _add_rms_norm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, stride_x, stride_res, n, eps,
                         BLOCK: tl.constexpr):
    """res_out = x + residual (rounded to the dtype, as HF's add is); out = RMSNorm(res_out)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    res = tl.load(res_ptr + row * stride_res + cols, mask=mask, other=0.0).to(tl.float32)
    total = (x + res).to(res_out_ptr.dtype.element_ty)
    tl.store(res_out_ptr + row * n + cols, total, mask=mask)
    out = _norm_row(total.to(tl.float32), w_ptr, out_ptr, cols, mask, n, eps)
    tl.store(out_ptr + row * n + cols, out, mask=mask)


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, stride_x, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n
    gate = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + n + cols, mask=mask, other=0.0).to(tl.float32)
    act = (gate / (1.0 + tl.exp(-gate))).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * n + cols, (act * up).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rotary_kernel(q_ptr, k_ptr, cos_ptr, sin_ptr, q_out_ptr, k_out_ptr, stride_qt, stride_qh, stride_kt, stride_kh,
                   stride_ct, q_heads, k_heads, HALF: tl.constexpr, BLOCK: tl.constexpr):
    """One program per (token, head of q then k); half-split layout (HF's rotate_half):
    out[:h] = x1*cos[:h] - x2*sin[:h], out[h:] = x2*cos[h:] + x1*sin[h:]."""
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    cols = tl.arange(0, BLOCK)
    mask = cols < HALF
    c1 = tl.load(cos_ptr + token * stride_ct + cols, mask=mask, other=0.0).to(tl.float32)
    c2 = tl.load(cos_ptr + token * stride_ct + HALF + cols, mask=mask, other=0.0).to(tl.float32)
    s1 = tl.load(sin_ptr + token * stride_ct + cols, mask=mask, other=0.0).to(tl.float32)
    s2 = tl.load(sin_ptr + token * stride_ct + HALF + cols, mask=mask, other=0.0).to(tl.float32)
    if head < q_heads:
        src = q_ptr + token * stride_qt + head * stride_qh
        dst = q_out_ptr + (token * q_heads + head) * 2 * HALF
    else:
        src = k_ptr + token * stride_kt + (head - q_heads) * stride_kh
        dst = k_out_ptr + (token * k_heads + head - q_heads) * 2 * HALF
    x1 = tl.load(src + cols, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(dst + cols, (x1 * c1 - x2 * s1).to(q_out_ptr.dtype.element_ty), mask=mask)
    tl.store(dst + HALF + cols, (x2 * c2 + x1 * s2).to(q_out_ptr.dtype.element_ty), mask=mask)


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x as [rows, last dim] with a unit last stride (a view where the layout allows one)."""
    x = x.reshape(-1, x.shape[-1])
    return x if x.stride(-1) == 1 else x.contiguous()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    rows = _rows(x)
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    n = rows.shape[1]
    _rms_norm_kernel[(rows.shape[0],)](rows, weight, out, rows.stride(0), out.stride(0), n, eps,
                                       BLOCK=triton.next_power_of_2(n))
    return out.view(x.shape)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """(RMSNorm(x + residual), x + residual)."""
    rows, res = _rows(x), _rows(residual)
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    res_out = torch.empty(rows.shape, dtype=residual.dtype, device=x.device)
    n = rows.shape[1]
    _add_rms_norm_kernel[(rows.shape[0],)](rows, res, weight, out, res_out, rows.stride(0), res.stride(0), n, eps,
                                           BLOCK=triton.next_power_of_2(n))
    return out.view(x.shape), res_out.view(x.shape)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """x: [..., 2 * n], gate then up (a merged gate|up projection's output) -> silu(gate) * up."""
    rows = _rows(x)
    n = rows.shape[1] // 2
    out = torch.empty((rows.shape[0], n), dtype=x.dtype, device=x.device)
    block = min(COLUMNS, triton.next_power_of_2(n))
    _silu_and_mul_kernel[(rows.shape[0], triton.cdiv(n, block))](rows, out, rows.stride(0), n, BLOCK=block)
    return out.view(*x.shape[:-1], n)


def rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """q [..., tokens, q_heads, D], k [..., tokens, k_heads, D] (any token/head strides, as the
    split of a merged qkv output gives), cos/sin [..., tokens, D] as HF's rotary module returns
    them. Returns new contiguous q and k in the same shapes."""
    dim = q.shape[-1]
    q3, k3 = q.reshape(-1, *q.shape[-2:]), k.reshape(-1, *k.shape[-2:])
    cos2, sin2 = cos.reshape(-1, dim).contiguous(), sin.reshape(-1, dim).contiguous()
    if q3.stride(-1) != 1 or k3.stride(-1) != 1:
        q3, k3 = q3.contiguous(), k3.contiguous()
    q_out, k_out = torch.empty(q3.shape, dtype=q.dtype, device=q.device), torch.empty(k3.shape, dtype=k.dtype, device=k.device)
    tokens, q_heads, k_heads = q3.shape[0], q3.shape[1], k3.shape[1]
    _rotary_kernel[(tokens, q_heads + k_heads)](q3, k3, cos2, sin2, q_out, k_out, q3.stride(0), q3.stride(1),
                                                k3.stride(0), k3.stride(1), cos2.stride(0), q_heads, k_heads,
                                                HALF=dim // 2, BLOCK=triton.next_power_of_2(dim // 2))
    return q_out.view(q.shape), k_out.view(k.shape)
