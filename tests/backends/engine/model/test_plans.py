"""The CUDA execution plan run on CPU: only graph capture and the GPU memory queries are stood in
for (tests/support/cuda_stand_ins.py). Construction order, pool sizing, capture once per bucket,
replay on static buffers with padding, and sampling on the logits' device are the real code."""
from __future__ import annotations

import pytest
import torch

from backends.engine import EngineConfig, SamplingParams
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.model.plans import Decode, choose_plan
from tests.support.cuda_stand_ins import cuda_plan_on_cpu
from tests.support.prompts import random_prompts

from tests.backends.models import hf_greedy, tiny_llama

CPU = torch.device("cpu")
KV_BYTES = 1 << 20


def _config(**overrides) -> EngineConfig:
    return EngineConfig(model="tiny", block_size=4, max_num_batched_tokens=64, max_num_seqs=8, **overrides)


def test_each_device_gets_one_plan_and_conflicting_paths_are_refused():
    assert choose_plan(_config(), CPU).decode == Decode.EAGER
    assert choose_plan(_config(compile_decode=True), CPU).decode == Decode.COMPILED
    assert choose_plan(_config(padded_decode=True), CPU).decode == Decode.PADDED
    cuda = cuda_plan_on_cpu(_config(), kv_bytes=KV_BYTES)
    assert cuda.decode == Decode.GRAPHS and cuda.moves_inputs and cuda.name == "cpu/cuda-graphs"
    assert cuda_plan_on_cpu(_config(cuda_graphs=False), kv_bytes=KV_BYTES).decode == Decode.EAGER
    for cpu_path in ("compile_decode", "padded_decode"):
        with pytest.raises(ValueError, match=f"{cpu_path} is a CPU decode path"):
            cuda_plan_on_cpu(_config(**{cpu_path: True}))
    # refused with the settings, before weights load
    with pytest.raises(ValueError, match="compile_decode and padded_decode are different decode paths"):
        _config(compile_decode=True, padded_decode=True)
    with pytest.raises(ValueError, match="on the CPU, padded_decode"):  # CPU's graph path has its own name
        _config(cuda_graphs=True)


def test_step_limits_fit_the_device():
    assert (EngineConfig(model="m", device="cuda").max_num_batched_tokens, EngineConfig(model="m", device="cuda").max_num_seqs) \
        == (4096, 256)
    assert (EngineConfig(model="m").max_num_batched_tokens, EngineConfig(model="m").max_num_seqs) == (512, 64)
    assert EngineConfig(model="m", device="cuda", max_num_seqs=32).max_num_seqs == 32


@pytest.mark.slow  # HF's own generate as the reference
def test_the_cuda_plan_sizes_its_pool_captures_each_bucket_once_and_matches_hf():
    model, reference = tiny_llama()
    prompts = random_prompts(6, 512, shared_prefix=8, seed=4)
    # different lengths: the decode batch shrinks to 1 through several buckets
    params = [SamplingParams(max_tokens=2 + 2 * i, temperature=0.0, ignore_eos=True) for i in range(len(prompts))]
    expected = [hf_greedy(reference, p, sp.max_tokens) for p, sp in zip(prompts, params)]
    config = _config()
    plan = cuda_plan_on_cpu(config, kv_bytes=KV_BYTES)
    engine = LLMEngine(config, model=model, plan=plan)
    runner = engine.runner
    assert plan.kv_budget.profiled == 1 and runner.num_blocks == KV_BYTES // runner.bytes_per_block()
    assert engine.generate(prompts, params) == expected
    capture, steps = plan.capture, runner.decode_graphs.steps
    assert len(steps) >= 3 and capture.captures == len(steps)  # once per bucket, then replays
    assert sum(capture.replays.values()) == sum(steps.values())
    # async scheduling is on by default with the CUDA plan: decode steps ran ahead on replayed graphs
    assert engine.async_scheduling and engine.num_steps_ahead > 0 and runner.decode_graphs.refills[False] > 0
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


@pytest.mark.slow
def test_seeded_sampling_through_replayed_graphs_repeats_and_mixes_with_greedy():
    model, _ = tiny_llama()
    prompts = random_prompts(4, 512, shared_prefix=0, seed=8)
    params = [SamplingParams(max_tokens=8, temperature=0.9, top_p=0.9, top_k=40, seed=i, ignore_eos=True)
              for i in range(3)] + [SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)]

    def run():
        config = _config(num_blocks=128)
        return LLMEngine(config, model=model, plan=cuda_plan_on_cpu(config)).generate(prompts, params)

    first = run()
    assert run() == first
    eager = LLMEngine(_config(num_blocks=128), model=model).generate(prompts, params)
    assert first[-1] == eager[-1]  # the greedy row is what the CPU plan gives
