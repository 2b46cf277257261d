"""The CUDA plan's fused model (engine/model/fusion.py on the Triton kernel set, kernels/triton_fused.py)
through the engine: captured and replayed decode graphs (on CPU the capture stood in for and the
kernels in Triton's interpreter; with a GPU the device's own), greedy token-identical to HF."""
from __future__ import annotations

import pytest

from backends.engine.config import EngineConfig
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.model.plans import choose_plan
from backends.engine.core.sequence import SamplingParams
from kernels.fused_reference import triton_ops
from kernels.triton_paged_attention import triton_paged_attention
from tests.backends.models import hf_greedy, tiny_llama, tiny_qwen
from tests.kernels.device import DEVICE
from tests.support.cuda_stand_ins import cuda_plan_on_cpu
from tests.support.prompts import random_prompts

pytestmark = pytest.mark.slow  # the engine end to end in Triton's interpreter


@pytest.mark.parametrize("family", ["llama", "qwen3"])  # Qwen3: per-head norms on the split q/k views
def test_fused_modules_survive_graph_capture_and_replay_on_triton_kernels(family):
    model, reference = tiny_llama() if family == "llama" else tiny_qwen(3)
    prompts = random_prompts(3, 512, shared_prefix=8, seed=11, max_body=40)
    params = [SamplingParams(max_tokens=2 + 2 * i, temperature=0.0, ignore_eos=True) for i in range(3)]
    expected = [hf_greedy(reference, p, sp.max_tokens) for p, sp in zip(prompts, params)]
    config = EngineConfig(model="test", block_size=4, num_blocks=128, max_num_seqs=4, device=DEVICE.type)
    plan = choose_plan(config, DEVICE) if DEVICE.type == "cuda" else \
        cuda_plan_on_cpu(config, attend=triton_paged_attention, fused_ops=triton_ops())
    engine = LLMEngine(config, model=model, plan=plan)
    attention = model.model.layers[0].self_attn
    assert hasattr(attention, "qkv_proj") and attention.fused_ops.name == "triton"
    assert engine.generate(prompts, params) == expected
    assert sum(engine.runner.decode_graphs.steps.values()) > 0  # decode steps replayed the captured graphs
