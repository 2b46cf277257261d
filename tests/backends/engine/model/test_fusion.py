"""Kernel fusion on a loaded model (engine/model/fusion.py) with the torch kernel set, as a CPU runs it:
the same greedy tokens and close logits through our engine, merged plain projections but not
quantized ones, unknown families left alone or refused by name, the plan's setting honoured, and
fewer kernels per decode step."""
from __future__ import annotations

import copy
import logging

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from backends.engine.config import EngineConfig
from backends.engine.model.fusion import fuse_model
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.model.model_runner import ModelRunner
from backends.engine.model.plans import choose_plan
from backends.engine.quant.quantize import Int4Linear
from backends.engine.core.sequence import SamplingParams, Sequence
from kernels.fused_reference import TORCH_OPS, FusedOps
from tests.support.cuda_stand_ins import cuda_plan_on_cpu
from tests.support.prompts import random_prompts

from tests.backends.models import hf_greedy, tiny_gemma3, tiny_llama, tiny_qwen

CPU = torch.device("cpu")


def _config(**overrides) -> EngineConfig:
    return EngineConfig(model="tiny", block_size=4, num_blocks=128, **overrides)


def _pair(family: str):
    """(engine model, HF reference); Qwen2's q/k/v biases random (HF starts them at zero)."""
    if family == "llama":
        return tiny_llama()
    pair = tiny_qwen(int(family[-1]))
    torch.manual_seed(7)
    for engine_layer, reference_layer in zip(pair[0].model.layers, pair[1].model.layers):
        for name in ("q_proj", "k_proj", "v_proj"):
            bias = getattr(engine_layer.self_attn, name).bias
            if bias is not None:
                bias.data.normal_(0, 0.5)
                getattr(reference_layer.self_attn, name).bias.data.copy_(bias)
    return pair


def _last_logits(model, config: EngineConfig, prompt: list[int]) -> torch.Tensor:
    runner = ModelRunner(model, config)
    seq = Sequence(prompt, SamplingParams())
    seq.block_table = list(range(-(-len(prompt) // config.block_size)))
    return runner.forward([(seq, len(prompt))])[0]


@pytest.mark.slow  # HF's own generate as the reference
@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
def test_fused_model_gives_hf_greedy_tokens_and_close_logits(family):
    model, reference = _pair(family)
    unfused = copy.deepcopy(model)
    prompts = random_prompts(3, 512, shared_prefix=8, seed=3)
    params = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    engine = LLMEngine(_config(fuse_kernels=True), model=model)
    layer = model.model.layers[0]
    assert hasattr(layer.self_attn, "qkv_proj") and not hasattr(layer.self_attn, "q_proj")
    assert hasattr(layer.mlp, "gate_up_proj") and isinstance(layer.self_attn, type(unfused.model.layers[0].self_attn))
    assert engine.generate(prompts, params) == [hf_greedy(reference, p, params.max_tokens) for p in prompts]
    torch.testing.assert_close(_last_logits(model, _config(fuse_kernels=True), prompts[0]),
                               _last_logits(unfused, _config(), prompts[0]), rtol=1e-4, atol=1e-4)


def test_quantized_projections_stay_separate_and_plain_siblings_merge():
    model, _ = tiny_llama()
    quantized_attention = model.model.layers[0].self_attn
    for name in ("q_proj", "k_proj", "v_proj"):
        setattr(quantized_attention, name, Int4Linear.from_linear(getattr(quantized_attention, name), 32))
    unfused = copy.deepcopy(model)
    assert fuse_model(model, TORCH_OPS) == 2
    assert all(isinstance(getattr(quantized_attention, n), Int4Linear) for n in ("q_proj", "k_proj", "v_proj"))
    assert not hasattr(quantized_attention, "qkv_proj") and hasattr(model.model.layers[1].self_attn, "qkv_proj")
    weights = model.model.layers[1].self_attn.qkv_proj.weight
    assert fuse_model(model, TORCH_OPS) == 2 and model.model.layers[1].self_attn.qkv_proj.weight is weights  # once
    prompt = random_prompts(1, 512, shared_prefix=0, seed=9)[0]
    torch.testing.assert_close(_last_logits(model, _config(), prompt), _last_logits(unfused, _config(), prompt),
                               rtol=1e-4, atol=1e-4)


def test_an_unknown_family_runs_as_loaded_unless_fusion_was_asked_for(caplog):
    model, _ = tiny_gemma3()
    before = [type(m) for m in model.modules()]
    with caplog.at_level(logging.INFO, logger="tiergate.fusion"):
        assert fuse_model(model, TORCH_OPS) == 0
        assert fuse_model(model, TORCH_OPS) == 0
    assert [type(m) for m in model.modules()] == before
    assert sum("Gemma3ForCausalLM" in r.getMessage() for r in caplog.records) == 1  # logged once
    with pytest.raises(ValueError, match="fuse_kernels.*Gemma3ForCausalLM"):
        ModelRunner(model, _config(fuse_kernels=True))
    ModelRunner(model, _config(), plan=cuda_plan_on_cpu(_config()))  # the CUDA default: logged, not refused


def test_the_plan_fuses_on_cuda_by_default_on_cpu_when_asked_and_never_when_turned_off():
    assert choose_plan(_config(), CPU).fuse is None
    assert choose_plan(_config(fuse_kernels=True), CPU).fuse is not None
    assert cuda_plan_on_cpu(_config()).fuse is not None
    assert cuda_plan_on_cpu(_config(fuse_kernels=False)).fuse is None
    model, _ = tiny_llama()
    ModelRunner(model, _config(fuse_kernels=False), plan=cuda_plan_on_cpu(_config(fuse_kernels=False)))
    assert hasattr(model.model.layers[0].self_attn, "q_proj")
    ModelRunner(model, _config(), plan=cuda_plan_on_cpu(_config()))
    assert hasattr(model.model.layers[0].self_attn, "qkv_proj")


class KernelCount(TorchDispatchMode):
    """aten ops that compute (views and allocations are not kernels); a fused op counts as one
    kernel, its own torch ops are not counted (on a GPU it is one Triton launch)."""

    def __init__(self):
        super().__init__()
        self.ops, self.inside = [], False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.inside and not func.is_view and "empty" not in func.__name__:
            self.ops.append(func.__name__)
        return func(*args, **(kwargs or {}))

    def kernel_set(self) -> FusedOps:
        def one_kernel(op):
            def run(*args):
                self.ops.append("fused")
                self.inside = True
                try:
                    return op(*args)
                finally:
                    self.inside = False
            return run
        return FusedOps("counted", *(one_kernel(op) for op in (TORCH_OPS.rms_norm, TORCH_OPS.add_rms_norm,
                                                                TORCH_OPS.silu_and_mul, TORCH_OPS.rotary)))


def _decode_step_kernels(fused: bool) -> list[str]:
    model, _ = tiny_llama()
    counter = KernelCount()
    config = _config(fuse_kernels=fused)
    runner = ModelRunner(model, config, plan=choose_plan(config, CPU, fused_ops=counter.kernel_set()))
    runner.dummy_decode(1, 2)  # warm: the first step builds what later steps reuse
    counter.ops.clear()
    with counter:
        runner.dummy_decode(1, 2)
    return counter.ops


def test_a_fused_decode_step_runs_fewer_kernels():
    plain, fused = _decode_step_kernels(False), _decode_step_kernels(True)
    layers = tiny_llama()[0].config.num_hidden_layers
    matmuls = lambda ops: sum(op.split(".")[0] in ("linear", "mm", "addmm") for op in ops)  # noqa: E731
    assert matmuls(plain) - matmuls(fused) == 3 * layers  # q/k/v and gate/up: 7 projections a layer become 4
    assert fused.count("fused") == 4 * layers + 1  # norm, rotary, add+norm, SiLU-and-mul; the final norm
    assert len(fused) < len(plain) - 10 * layers, (len(plain), len(fused))


def test_the_worker_flag_is_unset_on_or_off():
    from backends.worker import build_parser

    flag = [build_parser().parse_args(["--model", "m", *extra]).fuse_kernels
            for extra in ([], ["--fuse-kernels"], ["--no-fuse-kernels"])]
    assert flag == [None, True, False]
