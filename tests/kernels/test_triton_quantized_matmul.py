"""The Triton weight-only int8/int4 GEMM against fp32 matmuls on the dequantised weights (in
Triton's interpreter on CPU, or compiled where there is a GPU: tests/kernels/device.py).

Activations are fp32 here: Triton 3.9's interpreter multiplies bf16 as raw uint16 bits, so
the kernel lifts operands to fp32 there anyway; bf16/fp16 are checked only on a GPU.
Shapes cover decode (M=1 to 16: the split-k GEMV of kernels/triton_quantized_gemv.py) to small
prefill tiles (M=17: the tiled GEMM, spilling into a second row tile), odd
out_features (a partial column tile, which the CPU int4 kernel cannot take), both group
sizes, and k spanning several groups or k tiles.
"""
from __future__ import annotations

import pytest
import torch

from kernels.quantized_linear import dequantize_int4, dequantize_int8, quantize_int4, quantize_int8
from kernels import triton_quantized_gemv
from kernels.triton_quantized_gemv import TARGET_PROGRAMS, split_k
from kernels.triton_quantized_matmul import pack_int4_along_k, triton_int4_linear, triton_int8_linear
from tests.kernels.device import DEVICE

SHAPES = [(1, 64, 33), (3, 128, 47), (8, 96, 65), (16, 64, 17), (17, 192, 129)]  # (M, K, N)


def _inputs(m, k, n, seed, bias):
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(n, k, generator=gen) * 0.1
    x = torch.randn(2, m, k, generator=gen)  # a leading batch dim, as transformers passes [1, T, k]
    b = torch.randn(n, generator=gen) if bias else None
    return weight, x, b


def _close(got, expected):
    # fp32 through both paths: only summation order differs
    torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("bias", [False, True])
def test_int8_matches_dequantised_weights(m, k, n, bias):
    weight, x, b = _inputs(m, k, n, seed=m * 1000 + n, bias=bias)
    codes, scales = quantize_int8(weight)
    expected = torch.nn.functional.linear(x, dequantize_int8(codes, scales), b)
    to = lambda t: None if t is None else t.to(DEVICE)  # noqa: E731
    got = triton_int8_linear(to(x), to(codes), to(scales), to(b))
    assert got.shape == (2, m, n) and got.dtype == x.dtype
    _close(got, expected)


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("group_size", [32, 64])
def test_int4_matches_dequantised_weights(m, k, n, group_size):
    if k % group_size:
        pytest.skip("k must be a multiple of the group size")
    weight, x, b = _inputs(m, k, n, seed=m * 1000 + n + group_size, bias=True)
    codes, scales_and_zeros = quantize_int4(weight, group_size)
    expected = torch.nn.functional.linear(x, dequantize_int4(codes, scales_and_zeros, group_size), b)
    got = triton_int4_linear(x.to(DEVICE), pack_int4_along_k(codes).to(DEVICE), scales_and_zeros.to(DEVICE),
                             group_size, b.to(DEVICE))
    assert got.shape == (2, m, n)
    _close(got, expected)


def test_int4_packing_puts_even_k_in_the_low_nibble():
    codes = torch.tensor([[1, 2, 15, 0], [7, 8, 9, 10]])
    assert pack_int4_along_k(codes).tolist() == [[0x21, 0x0F], [0x87, 0xA9]]


def test_int4_uses_each_groups_own_scale_and_zero():
    """Codes all 8 (w = zero), a different zero per group: a kernel reading the wrong group's
    scale/zero, or dropping the -8 offset, gets another sum."""
    n, k, group = 3, 64, 32
    codes = torch.full((n, k), 8)
    sz = torch.zeros(k // group, n, 2)
    sz[0, :, 0], sz[1, :, 0] = 0.5, 2.0  # scales, irrelevant at code 8
    sz[0, :, 1], sz[1, :, 1] = 1.0, -3.0  # zeros
    x = torch.ones(1, k)
    got = triton_int4_linear(x.to(DEVICE), pack_int4_along_k(codes).to(DEVICE), sz.to(DEVICE), group)
    assert got.cpu().tolist() == [[32 * 1.0 + 32 * -3.0] * n]


def test_int4_refuses_inputs_that_do_not_fit_the_weights():
    codes, sz = quantize_int4(torch.randn(16, 64), 32)
    with pytest.raises(ValueError, match="does not fit"):
        triton_int4_linear(torch.randn(1, 96).to(DEVICE), pack_int4_along_k(codes).to(DEVICE), sz.to(DEVICE), 32)


@pytest.mark.gpu  # the bf16/fp16 tensor-core path: Triton's interpreter cannot run it
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_activations_on_gpu(dtype):
    weight, x, b = _inputs(5, 128, 47, seed=7, bias=True)
    codes, sz = quantize_int4(weight, 32)
    expected = torch.nn.functional.linear(x.to(dtype).float(), dequantize_int4(codes, sz, 32), b)
    got = triton_int4_linear(x.to(DEVICE, dtype), pack_int4_along_k(codes).to(DEVICE), sz.to(DEVICE), 32,
                             b.to(DEVICE))
    assert got.dtype == dtype
    torch.testing.assert_close(got.float().cpu(), expected, atol=3e-2, rtol=3e-2)


def test_gemv_splits_k_until_the_gpu_is_full():
    """A decode row of a 3B projection (n 3072, 96 groups): 48 column blocks alone would leave
    most SMs idle. Every split holds at least one group, and together they cover k."""
    splits, per = split_k(1, 3072, 96)
    assert splits > 1 and 48 * splits <= TARGET_PROGRAMS and (splits - 1) * per < 96 <= splits * per
    assert split_k(16, 8192, 96) == (1, 96)  # enough programs from rows and columns already
    assert split_k(1, 64, 3) == (3, 1)


@pytest.mark.parametrize("m,programs", [(1, TARGET_PROGRAMS), (3, 33)])
@pytest.mark.parametrize("group_size", [32, 128])
def test_gemv_with_many_k_splits(monkeypatch, m, programs, group_size):
    """k 1024 in up to 32 splits; with 33 programs for 3 rows, 11 splits of 3 groups of 32: not a
    multiple of the 4 groups read per loop step (fewer programs keep the interpreter quick)."""
    monkeypatch.setattr(triton_quantized_gemv, "TARGET_PROGRAMS", programs)
    n = 33
    weight, x, b = _inputs(m, 1024, n, seed=m + group_size, bias=True)
    codes, sz = quantize_int4(weight, group_size)
    assert split_k(m, n, 1024 // group_size)[0] > 1
    expected = torch.nn.functional.linear(x, dequantize_int4(codes, sz, group_size), b)
    got = triton_int4_linear(x.to(DEVICE), pack_int4_along_k(codes).to(DEVICE), sz.to(DEVICE), group_size,
                             b.to(DEVICE))
    _close(got, expected)
    int8_codes, scales = quantize_int8(weight)
    expected = torch.nn.functional.linear(x, dequantize_int8(int8_codes, scales), b)
    _close(triton_int8_linear(x.to(DEVICE), int8_codes.to(DEVICE), scales.to(DEVICE), b.to(DEVICE)), expected)


@pytest.mark.parametrize("m", [1, 3])
def test_gemv_takes_bf16_activations(m):
    """The GEMV lifts operands to fp32 before multiplying, so bf16 runs in the interpreter too;
    the output is bf16 (one rounding of the fp32 sum)."""
    weight, x, b = _inputs(m, 256, 47, seed=m, bias=True)
    x = x.to(torch.bfloat16)
    codes, sz = quantize_int4(weight, 64)
    expected = torch.nn.functional.linear(x.float(), dequantize_int4(codes, sz, 64), b)
    got = triton_int4_linear(x.to(DEVICE), pack_int4_along_k(codes).to(DEVICE), sz.to(DEVICE), 64, b.to(DEVICE))
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float().cpu(), expected, atol=1e-2 * expected.abs().max().item(), rtol=0)
    int8_codes, scales = quantize_int8(weight)
    expected = torch.nn.functional.linear(x.float(), dequantize_int8(int8_codes, scales), b)
    got = triton_int8_linear(x.to(DEVICE), int8_codes.to(DEVICE), scales.to(DEVICE), b.to(DEVICE))
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float().cpu(), expected, atol=1e-2 * expected.abs().max().item(), rtol=0)


def test_gemv_takes_no_rows():
    codes, sz = quantize_int4(torch.randn(16, 64), 32)
    got = triton_int4_linear(torch.zeros(0, 64).to(DEVICE), pack_int4_along_k(codes).to(DEVICE), sz.to(DEVICE), 32)
    assert got.shape == (0, 16)
