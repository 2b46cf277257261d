"""int4 codes dequantized for a plain matmul (kernels/int4_dequant.py): the same weights the
other int4 paths multiply by, read from the along-k packing the Triton kernels share."""
from __future__ import annotations

import torch

from kernels.int4_dequant import dequant_int4_linear, dequantize_along_k, pack_int4_along_k
from kernels.quantized_linear import dequantize_int4, quantize_int4


def test_dequantized_weights_are_the_quantizer_s():
    gen = torch.Generator().manual_seed(3)
    codes, scales_and_zeros = quantize_int4(torch.randn(24, 192, generator=gen), 64)
    got = dequantize_along_k(pack_int4_along_k(codes), scales_and_zeros, 64, torch.float32)
    torch.testing.assert_close(got, dequantize_int4(codes, scales_and_zeros, 64), atol=0, rtol=0)


def test_the_matmul_keeps_the_activations_dtype_and_shape():
    gen = torch.Generator().manual_seed(4)
    codes, scales_and_zeros = quantize_int4(torch.randn(16, 64, generator=gen), 32)
    x = torch.randn(2, 3, 64, generator=gen)
    got = dequant_int4_linear(x, pack_int4_along_k(codes), scales_and_zeros, 32)
    expected = x @ dequantize_int4(codes, scales_and_zeros, 32).t()
    assert got.dtype == torch.float32 and got.shape == (2, 3, 16)
    torch.testing.assert_close(got, expected, atol=2e-2 * expected.abs().max().item(), rtol=0)
