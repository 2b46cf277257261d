"""Our C++ int4 linear (kernels/csrc/int4_linear_cpu.cpp) on its tiles (pack_int4_tiles): x
rounded per group (to int16, or int8 in the AVX2 build), exact int32 sums per group. Every build
this CPU runs is checked against the fp32 product of the weights the tiles hold, with the bound
that the rounding of x allows; and the int4 layer built from GGUF Q4_1 blocks holds exactly the
blocks' weights."""
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


def rounding_bound(x: torch.Tensor, weights: torch.Tensor, group: int, levels: int = 16383) -> torch.Tensor:
    """Each x is off by at most half its group's step (max|x_group| / levels); fp32 rounding of the
    scaled group sums adds a few parts in 2^24 of the exact product."""
    rows, features = x.shape
    step = x.abs().reshape(rows, features // group, group).amax(dim=-1).repeat_interleave(group, dim=1) / levels
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
                                                            (24, 192, 64), (20, 128, 32), (12, 128, 64)])
def test_int4_kernel_is_within_the_rounding_of_x_of_the_fp32_product(isa, rows, out_features, in_features, group):
    tiles = tiles_for(out_features, in_features, group, seed=rows)
    weights = dequantize_int4_tiles(tiles, group)
    # a few input channels hundreds of times larger than the rest, as an LLM's activations have
    x = torch.randn(rows, in_features) * torch.where(torch.rand(in_features) < 0.02, 300.0, 1.0)
    out = cpu_kernels.int4_linear(x, tiles, group, isa=isa)
    reference = x @ weights.t()
    assert out.dtype == torch.float32 and out.shape == (rows, out_features)
    bound = rounding_bound(x, weights, group, cpu_kernels.int4_activation_levels(isa))
    assert ((out - reference).abs() <= bound).all()


def test_the_builds_sum_the_same_products(isa):
    """With x already on every build's grid (integers up to 127 per group), no build rounds it:
    all give the exact product, up to fp32 rounding of the group sums."""
    tiles = tiles_for(96, 576, 32)
    weights = dequantize_int4_tiles(tiles, 32)
    x = torch.randint(-127, 128, (5, 576)).float()
    x[:, ::32] = 127  # each group's largest magnitude is 127, so its step is exactly 1
    reference = x.double() @ weights.double().t()
    out = cpu_kernels.int4_linear(x, tiles, 32, isa=isa)
    torch.testing.assert_close(out.double(), reference, rtol=1e-5, atol=1e-3)


def test_a_row_gets_the_same_result_alone_or_among_many(isa):
    """Many rows of x pass over a slice of the tiles before the next slice: each row's result is
    the one it gets alone, bit for bit, whatever its place in the batch."""
    tiles = tiles_for(204, 576, 32)  # 51 tiles: several slices, and an odd tile at the end
    x = torch.randn(37, 576)
    alone = torch.cat([cpu_kernels.int4_linear(row[None], tiles, 32, isa=isa) for row in x])
    assert torch.equal(cpu_kernels.int4_linear(x, tiles, 32, isa=isa), alone)


def test_x_at_the_edges_of_the_int_range_does_not_wrap(isa):
    """The AVX2 build's int16 pair sums are at their largest with codes of 15 against x of
    +-127 in every position of a group of 64 (16 products a lane): they must not overflow."""
    codes = torch.full((8, 128), 15, dtype=torch.int32)
    tiles = pack_int4_tiles(codes, torch.ones(8, 2), torch.zeros(8, 2), 64)
    x = torch.tensor([[127.0] * 128, [-127.0] * 128])
    out = cpu_kernels.int4_linear(x, tiles, 64, isa=isa)
    assert torch.equal(out, torch.tensor([[15.0 * 127 * 128] * 8, [-15.0 * 127 * 128] * 8]))


def test_bf16_inputs_zero_rows_and_zero_inputs(isa):
    tiles = tiles_for(8, 64, 32)
    x = torch.randn(3, 64).to(torch.bfloat16)
    torch.testing.assert_close(cpu_kernels.int4_linear(x, tiles, 32, isa=isa),
                               cpu_kernels.int4_linear(x.float(), tiles, 32, isa=isa))
    out = cpu_kernels.int4_linear(torch.zeros(2, 64), tiles, 32, isa=isa)  # sum of x is 0: the mins add nothing
    assert out.eq(0).all()
    assert cpu_kernels.int4_linear(torch.zeros(0, 64), tiles, 32, isa=isa).shape == (0, 8)


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
    bound = rounding_bound(x, dequantize_q4_1(blocks), 32, cpu_kernels.int4_activation_levels())
    assert ((layer(x) - reference).abs() <= bound).all()


def test_without_our_kernels_int4_layers_pack_for_aten(monkeypatch):
    linear, x = nn.Linear(64, 32), torch.randn(3, 64)
    ours = Int4Linear.from_linear(linear, 32)
    expected = ours(x)
    monkeypatch.setattr(cpu_kernels, "_loaded", False)
    theirs = Int4Linear.from_linear(linear, 32)
    assert (ours.kernel, theirs.kernel) == ("cpp", "aten") and quantize.cpu_kernel() == "aten"
    torch.testing.assert_close(theirs(x), expected, rtol=2e-2, atol=2e-2)  # aten's kernel takes bf16 activations
