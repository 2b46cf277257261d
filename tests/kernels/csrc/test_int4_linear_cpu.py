"""Our C++ int4 linear (kernels/csrc/int4_linear_cpu.cpp) on its tiles (pack_int4_tiles): x
rounded to int16 per group, codes widened to int16, exact int32 sums per group. Checked against
the fp32 product of the weights the tiles hold, with the bound the int16 rounding allows; and
the int4 layer built from GGUF Q4_1 blocks holds exactly the blocks' weights."""
import pytest
import torch
from torch import nn

from backends.engine.quant import quantize
from backends.engine.quant.quantize import Int4Linear
from kernels import cpu_kernels
from kernels.quantized_linear import (dequantize_int4_tiles, dequantize_q4_1, pack_int4_tiles, quantize_int4,
                                      scales_and_mins, unpack_int4_tiles)


def tiles_for(out_features: int, in_features: int, group: int, seed: int = 0) -> torch.Tensor:
    torch.manual_seed(seed)
    codes, scales_and_zeros = quantize_int4(torch.randn(out_features, in_features), group)
    return pack_int4_tiles(codes, *scales_and_mins(scales_and_zeros), group)


def rounding_bound(x: torch.Tensor, weights: torch.Tensor, group: int) -> torch.Tensor:
    """Each x is off by at most half its group's int16 step (max|x_group| / 16383); fp32 rounding
    of the scaled group sums adds a few parts in 2^24 of the exact product."""
    rows, features = x.shape
    step = x.abs().reshape(rows, features // group, group).amax(dim=-1).repeat_interleave(group, dim=1) / 16383
    return (step / 2) @ weights.abs().t() + 1e-6 * (x.abs() @ weights.abs().t()) + 1e-6


@pytest.mark.parametrize("group", [32, 64])
def test_tiles_hold_the_codes_and_fp16_scales_and_mins(group):
    torch.manual_seed(group)
    codes, scales_and_zeros = quantize_int4(torch.randn(24, 192), group)
    scales, mins = scales_and_mins(scales_and_zeros)
    got_codes, got_scales, got_mins = unpack_int4_tiles(pack_int4_tiles(codes, scales, mins, group), group)
    assert torch.equal(got_codes, codes)
    assert torch.equal(got_scales, scales.half().float()) and torch.equal(got_mins, mins.half().float())


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 6, 7, 8, 17])
@pytest.mark.parametrize("out_features,in_features,group", [(4, 64, 32), (96, 576, 32), (40, 1536, 32),
                                                            (24, 192, 64)])
def test_int4_kernel_is_within_the_int16_rounding_of_the_fp32_product(rows, out_features, in_features, group):
    assert cpu_kernels.available()  # the build must work wherever the tests run
    tiles = tiles_for(out_features, in_features, group, seed=rows)
    weights = dequantize_int4_tiles(tiles, group)
    # a few input channels hundreds of times larger than the rest, as an LLM's activations have
    x = torch.randn(rows, in_features) * torch.where(torch.rand(in_features) < 0.02, 300.0, 1.0)
    out = cpu_kernels.int4_linear(x, tiles, group)
    reference = x @ weights.t()
    assert out.dtype == torch.float32 and out.shape == (rows, out_features)
    assert ((out - reference).abs() <= rounding_bound(x, weights, group)).all()


def test_bf16_inputs_zero_rows_and_zero_inputs():
    tiles = tiles_for(8, 64, 32)
    x = torch.randn(3, 64).to(torch.bfloat16)
    torch.testing.assert_close(cpu_kernels.int4_linear(x, tiles, 32), cpu_kernels.int4_linear(x.float(), tiles, 32))
    out = cpu_kernels.int4_linear(torch.zeros(2, 64), tiles, 32)  # sum of x is 0: the mins add nothing
    assert out.eq(0).all()
    assert cpu_kernels.int4_linear(torch.zeros(0, 64), tiles, 32).shape == (0, 8)


def test_shapes_it_cannot_take_are_refused_by_name():
    tiles = tiles_for(8, 64, 32)
    with pytest.raises(RuntimeError, match="x has 96 features, the tiles 64"):
        cpu_kernels.int4_linear(torch.randn(2, 96), tiles, 32)
    with pytest.raises(RuntimeError, match="groups of 32 or 64"):
        cpu_kernels.int4_linear(torch.randn(2, 64), tiles, 48)
    with pytest.raises(RuntimeError, match="uint8 tiles"):
        cpu_kernels.int4_linear(torch.randn(2, 64), tiles, 64)  # tiles packed for groups of 32
    with pytest.raises(ValueError, match="out_features % 4"):
        pack_int4_tiles(torch.zeros(6, 64, dtype=torch.int32), torch.ones(6, 2), torch.zeros(6, 2), 32)


def q4_1_blocks(out_features: int, in_features: int) -> torch.Tensor:
    """Random GGUF Q4_1 blocks: fp16 d, fp16 m, 16 bytes of nibbles per 32 weights."""
    torch.manual_seed(7)
    blocks = out_features * in_features // 32
    d = (torch.rand(blocks) * 0.02).half().view(torch.uint8).reshape(blocks, 2)
    m = (-torch.rand(blocks) * 0.1).half().view(torch.uint8).reshape(blocks, 2)
    nibbles = torch.randint(0, 256, (blocks, 16), dtype=torch.uint8)
    return torch.cat([d, m, nibbles], dim=1).reshape(out_features, -1)


def test_int4_layer_from_q4_1_holds_exactly_the_blocks_weights():
    """No second rounding: the tiles keep each block's codes and its fp16 d and m as they are."""
    blocks = q4_1_blocks(32, 128)
    layer = Int4Linear.from_q4_1(nn.Linear(128, 32, bias=False), blocks)
    assert layer.kernel == "cpp" and layer.scales_and_zeros is None
    assert torch.equal(layer.dequantized(), dequantize_q4_1(blocks))
    x = torch.randn(2, 128)
    reference = x @ dequantize_q4_1(blocks).t()
    assert ((layer(x) - reference).abs() <= rounding_bound(x, dequantize_q4_1(blocks), 32)).all()


def test_without_our_kernels_int4_layers_pack_for_aten(monkeypatch):
    linear, x = nn.Linear(64, 32), torch.randn(3, 64)
    ours = Int4Linear.from_linear(linear, 32)
    expected = ours(x)
    monkeypatch.setattr(cpu_kernels, "_loaded", False)
    theirs = Int4Linear.from_linear(linear, 32)
    assert (ours.kernel, theirs.kernel) == ("cpp", "aten") and quantize.cpu_kernel() == "aten"
    torch.testing.assert_close(theirs(x), expected, rtol=2e-2, atol=2e-2)  # aten's kernel takes bf16 activations
