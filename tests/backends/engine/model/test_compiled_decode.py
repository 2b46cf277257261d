"""Compiled decode steps on CPU (engine/model/compiled_decode.py): the whole model's decode step
compiled ahead of time into a package, paged attention included, built once and loaded by later starts. Greedy output must stay token-identical to Hugging
Face `generate`, through batches that shrink from 7 to 1, chunked prefill and speculative
verification (which run eagerly beside the compiled decode steps)."""
from __future__ import annotations

import copy

import pytest
import torch

from backends.engine import EngineConfig, SamplingParams
from backends.engine.quant import quantize
from backends.engine.core.llm_engine import LLMEngine
from kernels import quantized_linear

from tests.support.prompts import random_prompts

from tests.backends.models import hf_greedy, tiny_gemma3, tiny_llama

pytestmark = pytest.mark.slow  # AOTInductor builds each package with g++ (once per model and code)


def engine(model, compile_decode: bool, **overrides) -> LLMEngine:
    config = EngineConfig(**{"model": "test", "block_size": 4, "num_blocks": 512, "max_num_seqs": 8,
                             "max_num_batched_tokens": 64, "compile_decode": compile_decode, **overrides})
    return LLMEngine(config, model=model)


def case(make_model):
    model, reference = make_model()
    prompts = random_prompts(7, 512, shared_prefix=16, seed=4)
    params = [SamplingParams(max_tokens=3 + 2 * i, temperature=0.0, ignore_eos=True) for i in range(len(prompts))]
    return model, prompts, params, [hf_greedy(reference, p, sp.max_tokens) for p, sp in zip(prompts, params)]


@pytest.fixture(scope="module")
def llama_case():
    return case(tiny_llama)


@pytest.mark.parametrize("overrides", [{}, {"speculative": "ngram"}])
def test_compiled_decode_is_token_identical_to_hf(llama_case, overrides):
    model, prompts, params, expected = llama_case
    compiled = engine(model, True, **overrides)
    assert compiled.runner.compiled.warmed_up
    warm_up_steps = compiled.runner.compiled.steps
    assert compiled.generate(prompts, params) == expected
    assert compiled.runner.compiled.steps > warm_up_steps + 10
    assert compiled.block_manager.num_free_blocks == compiled.block_manager.num_blocks
    # the same (now compiled) model under a runner without compile still runs eagerly and right
    assert engine(model, False, **overrides).generate(prompts, params) == expected


def test_a_later_start_loads_the_packages_an_earlier_one_built(llama_case):
    model, prompts, params, expected = llama_case
    engine(model, True)  # builds what the shelf lacks
    again = engine(model, True)
    assert again.runner.compiled.built == 0
    assert again.generate(prompts, params) == expected


def test_sliding_window_layers_compile_too():
    """Gemma 3 mixes sliding-window and full-attention layers: two variants of one graph."""
    model, prompts, params, expected = case(tiny_gemma3)
    assert engine(model, True).generate(prompts, params) == expected


def test_large_decode_batches_reuse_the_warmed_up_graph_with_int4_dense_prefill():
    """The batched package serves every batch up to max_num_seqs. int4 layers with a bf16 prefill
    copy pick a path by row count: the compiled step must not depend on it."""
    model, _ = tiny_llama()
    # a budget that prefills all 18 prompts in one step, so the decode steps carry all 18
    compiled = engine(model, True, quantization="int4", int4_dense_prefill=True, max_num_seqs=20,
                      max_num_batched_tokens=4096)
    warm_up_steps = compiled.runner.compiled.steps
    prompts = random_prompts(18, 512, shared_prefix=0, seed=5)
    outputs = compiled.generate(prompts, SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))
    assert [len(o) for o in outputs] == [6] * 18
    assert compiled.runner.compiled.steps == warm_up_steps + 5  # five decode steps of 18 sequences


def test_batched_steps_on_the_dense_int8_head_give_the_int8_kernels_tokens(monkeypatch):
    """With --int4-dense-prefill the int8 LM head also keeps its codes in bf16, and compiled
    steps of 2+ rows multiply by them, applying the head themselves: the same greedy tokens
    as eager steps through aten's int8 kernel, which also takes bf16 activations."""
    # the copy is made only where bf16 is native; forced here so every CPU runs the path
    monkeypatch.setattr(quantize, "dense_prefill_dtype", lambda: torch.bfloat16)
    # eager steps through aten's kernel, not our int16 one (a finer rounding that may flip near-ties)
    monkeypatch.setattr(quantized_linear, "INT8_KERNEL_MAX_ROWS", 0)
    model, _ = tiny_llama()
    prompts = random_prompts(6, 512, shared_prefix=0, seed=7)
    params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
    options = {"quantization": "int4", "int4_dense_prefill": True}
    expected = engine(copy.deepcopy(model), False, **options).generate(prompts, params)
    compiled = engine(model, True, **options)
    assert compiled.runner.model.get_output_embeddings().dense_codes is not None
    assert compiled.generate(prompts, params) == expected
