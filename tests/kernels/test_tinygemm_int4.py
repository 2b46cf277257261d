"""int4 layers on aten's CUDA tinygemm kernel (kernels/tinygemm_int4.py) and the one chooser
that sends layers there (quantize.int4_kernel). On CPU the two CUDA-only aten calls are stood in
for (tests/support/cuda_stand_ins.Int4PackMatmul, the documented contract); our packing into the
converter's input, our scales and zeros, the dtype casts and the bias are the real code."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from backends.engine.quant.quantize import Int4Linear, Int8Linear, Kernel, int4_kernel, int8_kernel, quantize_linears
from kernels import tinygemm_int4
from kernels.quantized_linear import dequantize_int4, quantize_int4
from tests.support.cuda_stand_ins import Int4PackMatmul, install_tinygemm

CUDA = torch.device("cuda")
LLAMA_3B = dict(in_features=3072, out_features=8192, group_size=32)


@pytest.fixture
def stand_in(monkeypatch) -> Int4PackMatmul:
    return install_tinygemm(monkeypatch)


@pytest.fixture
def gpu(monkeypatch):
    """Pretend `capability` is what the CUDA device reports."""
    def set_capability(found):
        monkeypatch.setattr(tinygemm_int4, "capability", lambda device: found if device.type == "cuda" else None)
    return set_capability


def _on(device, **shape) -> Kernel:
    s = {**LLAMA_3B, **shape}
    return int4_kernel(device, s["in_features"], s["out_features"], s["group_size"], s.get("dtype", torch.bfloat16))


def test_converter_input_holds_even_k_in_the_high_nibble():
    codes = torch.tensor([[1, 2, 15, 0], [7, 8, 9, 10]])
    assert tinygemm_int4.pack_high_nibble_first(codes).tolist() == [[0x12, 0xF0], [0x78, 0x9A]]


@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_tinygemm_layer_matches_the_dequantised_weights(stand_in, group_size):
    """A swapped nibble order, a wrong zero (min + 8 * scale) or a lost bias changes the product."""
    gen = torch.Generator().manual_seed(group_size)
    linear = nn.Linear(256, 48, bias=True)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(48, 256, generator=gen) * 0.1)
        linear.bias.copy_(torch.randn(48, generator=gen))
    layer = Int4Linear.from_linear(linear, group_size, Kernel.TINYGEMM)
    x = torch.randn(2, 3, 256, generator=gen).to(torch.bfloat16)
    expected = nn.functional.linear(x.float(), dequantize_int4(*quantize_int4(linear.weight, group_size), group_size),
                                    linear.bias)
    got = layer(x)
    assert got.dtype == torch.bfloat16 and got.shape == (2, 3, 48)
    assert (stand_in.converted, stand_in.multiplied) == (1, 1)
    torch.testing.assert_close(got.float(), expected, atol=2e-2 * expected.abs().max().item(), rtol=0)


def test_tinygemm_agrees_with_the_triton_layer_and_casts_other_activations(stand_in):
    """The same codes through Triton's kernel (in its interpreter, fp32) and tinygemm (bf16):
    fp32 activations go through tinygemm in bf16 and come back fp32; no rows launch nothing."""
    linear = nn.Linear(128, 40, bias=False)
    ours, triton = (Int4Linear.from_linear(linear, 32, kernel) for kernel in (Kernel.TINYGEMM, Kernel.TRITON))
    assert ours.kernel == Kernel.TINYGEMM and triton.kernel == Kernel.TRITON
    x = torch.randn(1, 4, 128)
    got, reference = ours(x), triton(x)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, reference, atol=2e-2 * reference.abs().max().item(), rtol=0)
    assert ours(torch.zeros(0, 128)).shape == (0, 40) and stand_in.multiplied == 1


def test_the_gpu_decides_tinygemm_or_triton(gpu):
    gpu((9, 0))  # H100
    assert _on(CUDA) == Kernel.TINYGEMM
    assert _on(CUDA, group_size=256) == Kernel.TINYGEMM
    assert _on(CUDA, dtype=torch.float16) == Kernel.TRITON  # tinygemm takes bf16 only: fp16 keeps its precision
    assert _on(CUDA, dtype=torch.float32) == Kernel.TRITON
    assert _on(CUDA, out_features=8196) == Kernel.TRITON  # n not a multiple of 8
    gpu((7, 5))  # T4: no sm80 tensor-core instructions
    assert _on(CUDA) == Kernel.TRITON
    gpu(None)  # a ROCm build, or no CUDA at all
    assert _on(CUDA) == Kernel.TRITON
    with pytest.raises(ValueError, match="group_size 512 .*takes groups of"):
        _on(CUDA, group_size=512)


def test_cpu_and_other_devices(monkeypatch):
    assert _on("cpu") == Kernel.CPP and _on("cpu", group_size=128) == Kernel.ATEN  # our tiles take 32 and 64
    assert _on("cpu", in_features=32768) == Kernel.ATEN  # wider than our kernel's int32 sums allow
    with pytest.raises(ValueError, match="CPU or CUDA, not on mps"):
        _on("mps")


def test_an_asked_kernel_is_kept_but_tinygemm_only_where_the_layer_fits():
    ask = dict(device="cpu", in_features=128, group_size=32, dtype=torch.bfloat16)
    assert int4_kernel(**ask, out_features=48, asked="tinygemm") == Kernel.TINYGEMM
    assert int4_kernel(**ask, out_features=44, asked="tinygemm") == Kernel.TRITON
    assert int4_kernel(**{**ask, "dtype": torch.float32}, out_features=48, asked="tinygemm") == Kernel.TRITON
    assert int4_kernel(**ask, out_features=44, asked="aten") == Kernel.ATEN
    assert int8_kernel(Kernel.TINYGEMM) == Kernel.TRITON and int8_kernel(Kernel.CPP) == Kernel.CPP


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fits, self.odd = nn.Linear(128, 48), nn.Linear(128, 44)  # 44: not a multiple of 8

    def get_output_embeddings(self):
        return None


def test_quantize_linears_sends_each_layer_where_it_fits(stand_in):
    model = _Block().to(torch.bfloat16)
    counts = quantize_linears(model, "int4", 32, kernel="tinygemm")
    assert counts["quantized"] == 2 and (model.fits.kernel, model.odd.kernel) == (Kernel.TINYGEMM, Kernel.TRITON)
    int8 = _Block()
    quantize_linears(int8, "int8", kernel="tinygemm")
    assert isinstance(int8.fits, Int8Linear) and int8.fits.kernel == Kernel.TRITON


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 5, 64])
@pytest.mark.parametrize("group_size", [32, 128])
def test_real_tinygemm_on_the_gpu(rows, group_size):
    if not tinygemm_int4.runs_on(CUDA):
        pytest.skip("tinygemm needs an NVIDIA GPU of sm80 or newer")
    gen = torch.Generator().manual_seed(rows)
    linear = nn.Linear(512, 96, bias=True).to(CUDA, torch.bfloat16)
    layer = Int4Linear.from_linear(linear, group_size)  # the chooser's pick for a CUDA bf16 layer
    assert layer.kernel == Kernel.TINYGEMM
    x = torch.randn(rows, 512, generator=gen).to(CUDA, torch.bfloat16)
    weight = dequantize_int4(*quantize_int4(linear.weight, group_size), group_size)
    expected = nn.functional.linear(x.float(), weight, linear.bias.float())
    got = layer(x)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), expected, atol=2e-2 * expected.abs().max().item(), rtol=0)
