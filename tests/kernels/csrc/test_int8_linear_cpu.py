"""Our C++ int8 linear (kernels/csrc/int8_linear_cpu.cpp): x rounded to int16 per row, codes
widened to int16, exact int32 sums. Checked against the fp32 product of the dequantized weights,
with the bound that the int16 rounding of x allows, over shapes with every kind of tail."""
import pytest
import torch

from kernels import cpu_kernels
from kernels.quantized_linear import dequantize_int8, int8_linear, quantize_int8


def rounding_bound(x: torch.Tensor, dequantized: torch.Tensor) -> torch.Tensor:
    """Each x is off by at most half its row's int16 step (max|x| / 16383); fp32 rounding of the
    exact integer sum and of the two scales adds a few parts in 2^24."""
    step = x.abs().amax(dim=1, keepdim=True) / 16383
    exact = x.abs() @ dequantized.abs().t()
    return step / 2 * dequantized.abs().sum(dim=1) + 1e-6 * exact + 1e-6


@pytest.mark.parametrize("rows,in_features,out_features", [(1, 576, 96), (3, 100, 50), (4, 64, 7), (5, 33, 130),
                                                           (17, 600, 40)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_int8_kernel_is_within_the_int16_rounding_of_the_fp32_product(isa, rows, in_features, out_features, dtype):
    torch.manual_seed(rows * in_features)
    codes, scales = quantize_int8(torch.randn(out_features, in_features))
    dequantized = dequantize_int8(codes, scales)
    x = (torch.randn(rows, in_features) * 3).to(dtype)
    out = cpu_kernels.int8_linear(x, codes, scales, isa=isa)
    reference = x.float() @ dequantized.t()
    assert out.dtype == torch.float32 and out.shape == (rows, out_features)
    assert ((out - reference).abs() <= rounding_bound(x.float(), dequantized)).all()


def test_zero_rows_and_zero_inputs(isa):
    codes, scales = quantize_int8(torch.randn(8, 64))
    assert cpu_kernels.int8_linear(torch.zeros(2, 64), codes, scales, isa=isa).eq(0).all()
    assert cpu_kernels.int8_linear(torch.zeros(0, 64), codes, scales, isa=isa).shape == (0, 8)


def test_shapes_it_cannot_take_are_refused_by_name():
    codes, scales = quantize_int8(torch.randn(8, 64))
    with pytest.raises(RuntimeError, match="int8_linear takes x"):
        cpu_kernels.int8_linear(torch.randn(2, 63), codes, scales)
    with pytest.raises(RuntimeError, match="one scale per row"):
        cpu_kernels.int8_linear(torch.randn(2, 64), codes, scales[:4])


def test_layer_picks_our_kernel_for_decodes_and_aten_for_prompt_chunks(monkeypatch):
    """Up to INT8_KERNEL_MAX_ROWS rows go through our kernel, more through aten's; with our
    kernel switched off (no compiler) every input goes through aten's."""
    torch.manual_seed(1)
    codes, scales = quantize_int8(torch.randn(32, 64))
    calls = []
    ours = cpu_kernels.int8_linear
    monkeypatch.setattr(cpu_kernels, "int8_linear", lambda *args: calls.append(args[0].shape[0]) or ours(*args))
    decode, chunk = torch.randn(16, 64), torch.randn(17, 64)
    int8_linear(decode, codes, scales)
    int8_linear(chunk, codes, scales)
    assert calls == [16]
    monkeypatch.setattr(cpu_kernels, "_loaded", False)
    int8_linear(decode, codes, scales)
    assert calls == [16]
