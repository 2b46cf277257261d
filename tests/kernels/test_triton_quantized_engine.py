"""The engine on the Triton int8/int4 GEMM (what a CUDA worker quantizes to), greedy
token-identical to HF `generate` on the same weights dequantised to fp32 (on CPU the GEMM
runs in Triton's interpreter with fp32 activations; with a GPU, on the GPU)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from backends.engine.config import EngineConfig
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.quant.quantize import Int4Linear, Int8Linear, default_kernel, quantize_linears
from backends.engine.core.sequence import SamplingParams
from kernels.quantized_linear import dequantize_int4, dequantize_int8, quantize_int4, quantize_int8
from tests.backends.models import hf_greedy, tiny_llama
from tests.support.prompts import random_prompts
from tests.kernels.device import DEVICE

pytestmark = pytest.mark.slow  # the engine end to end in Triton's interpreter


def dequantised_reference(reference: nn.Module, method: str, group_size: int) -> None:
    """Every decoder linear and the LM head hold the fp32 values the kernels stand for."""
    head = reference.get_output_embeddings()
    with torch.no_grad():
        for module in reference.modules():
            if isinstance(module, nn.Linear):
                w = module.weight
                if method == "int8" or module is head:
                    module.weight = nn.Parameter(dequantize_int8(*quantize_int8(w)))
                else:
                    module.weight = nn.Parameter(dequantize_int4(*quantize_int4(w, group_size), group_size))


@pytest.mark.parametrize("method,group_size", [("int8", 32), ("int4", 32), ("int4", 64)])
def test_engine_on_triton_quantized_kernels_matches_dequantised_hf(method, group_size):
    model, reference = tiny_llama()
    dequantised_reference(reference, method, group_size)
    prompts = random_prompts(3, 512, shared_prefix=8, seed=3)
    params = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    expected = [hf_greedy(reference, p, params.max_tokens) for p in prompts]
    counts = quantize_linears(model, method, group_size, kernel="triton")
    assert counts["quantized"] == 14 and counts["lm_head"]
    layer = model.model.layers[0].self_attn.q_proj
    assert isinstance(layer, Int8Linear if method == "int8" else Int4Linear) and layer.kernel == "triton"
    engine = LLMEngine(EngineConfig(model="test", block_size=8, num_blocks=256, device=DEVICE.type), model=model)
    assert engine.generate(prompts, params) == expected


def test_int4_triton_takes_out_features_aten_cannot():
    """out_features 40 (not a multiple of 16): aten's packer refuses it, the Triton layout does not."""
    torch.manual_seed(4)
    linear = nn.Linear(64, 40, bias=True)
    with pytest.raises(ValueError, match="multiple of 16"):
        Int4Linear.from_linear(linear, 32, kernel="aten")
    module = Int4Linear.from_linear(linear, 32, kernel="triton").to(DEVICE)
    x = torch.randn(1, 3, 64)
    expected = nn.functional.linear(x, dequantize_int4(*quantize_int4(linear.weight, 32), 32), linear.bias)
    torch.testing.assert_close(module(x.to(DEVICE)).cpu(), expected, atol=1e-4, rtol=1e-4)


def test_kernel_follows_the_models_device():
    assert default_kernel(nn.Linear(2, 2)) == "cpp"  # our C++ CPU kernels build wherever the tests run
    with pytest.raises(ValueError, match="kernel must be one of"):
        quantize_linears(nn.Sequential(nn.Linear(64, 32)), "int8", kernel="cublas")
