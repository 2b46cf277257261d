"""The whole engine on the Triton kernels, greedy token-identical to HF (on CPU the kernels
run in Triton's interpreter; with a GPU the engine runs there, as a CUDA worker does).

This is what a CUDA worker runs, minus the GPU: the runner's metadata (prefill chunks on
cached context, prefix-cache hits, decodes) reaches the kernels through the attention
interface, on a model with grouped-query attention, sliding-window layers and softcap."""
from __future__ import annotations

import pytest
import torch

from backends.engine.config import EngineConfig
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.model.plans import choose_plan
from backends.engine.core.sequence import SamplingParams
from tests.backends.models import hf_greedy, tiny_gemma2, tiny_llama
from tests.support.cuda_stand_ins import cuda_plan_on_cpu
from tests.support.prompts import random_prompts
from kernels.triton_paged_attention import triton_paged_attention
from tests.kernels.device import DEVICE

pytestmark = pytest.mark.slow  # the engine end to end in Triton's interpreter


def _plan(config):
    """The CUDA plan: on a GPU the device's own; on CPU with the capture stood in for."""
    if DEVICE.type == "cuda":
        return choose_plan(config, DEVICE)
    return cuda_plan_on_cpu(config, attend=triton_paged_attention)


def test_engine_on_triton_kernels_matches_hf_greedy():
    model, reference = tiny_gemma2(sliding_window=8, softcap=0.5)
    for m in (model, reference):  # random init leaves scores far inside the cap; make it bite
        for layer in m.model.layers:
            layer.self_attn.q_proj.weight.data *= 30
    prompts = random_prompts(4, 512, shared_prefix=16, seed=5)
    params = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    expected = [hf_greedy(reference, p, params.max_tokens) for p in prompts]
    # A small token budget chunks every prompt, so chunks attend over cached context too.
    config = EngineConfig(model="test", block_size=4, num_blocks=512, max_num_batched_tokens=48, device=DEVICE.type)
    engine = LLMEngine(config, model=model, plan=_plan(config))
    assert engine.generate(prompts, params) == expected
    assert engine.block_manager.prefix_hit_tokens > 0


def test_decode_graph_path_on_triton_kernels_matches_hf_greedy():
    """The CUDA-graph decode path (captured and replayed; on CPU with the capture stood in for) with
    the Triton decode kernel: padded rows have context length 0, for which the kernel must read
    nothing and write zeros."""
    model, reference = tiny_llama()
    prompts = random_prompts(3, 512, shared_prefix=8, seed=6)
    params = [SamplingParams(max_tokens=2 + 2 * i, temperature=0.0, ignore_eos=True) for i in range(3)]
    expected = [hf_greedy(reference, p, sp.max_tokens) for p, sp in zip(prompts, params)]
    config = EngineConfig(model="test", block_size=4, num_blocks=256, max_num_seqs=4, device=DEVICE.type)
    engine = LLMEngine(config, model=model, plan=_plan(config))
    assert engine.generate(prompts, params) == expected
    assert engine.runner.decode_graphs.steps[4] > 0  # 3 decodes padded to 4
    # padded rows attended to nothing and got zeros (NaN there would reach the next layer's K/V)
    scratch = engine.runner.decode_graphs.scratch_block
    assert all(torch.isfinite(k[scratch]).all() for k, _ in engine.runner.kv_caches)
