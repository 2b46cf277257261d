"""Greedy output of the paged engine must equal Hugging Face `generate` token for token,
with all prompts submitted at once, under prefix sharing, chunked prefill and preemption."""
import pytest

from backends.engine import EngineConfig, SamplingParams
from backends.engine.core.llm_engine import LLMEngine

from tests.support.prompts import random_prompts

from tests.backends.models import bundled, hf_greedy, tiny_gemma3, tiny_llama

pytestmark = pytest.mark.slow  # tiny and bundled models through the whole engine, against HF generate

GREEDY = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)

VARIANTS = {
    "default": dict(max_num_batched_tokens=512),
    # every prompt is longer than the budget, so every prompt is chunked
    "chunked": dict(max_num_batched_tokens=7),
    # a pool far smaller than 16 sequences need forces preemption and recompute
    "preempting": dict(num_blocks=40, max_num_batched_tokens=64),
    "no_prefix_cache": dict(enable_prefix_caching=False),
}


def run_engine(model, tokenizer, prompts, params=GREEDY, block_size=8, **overrides):
    config = EngineConfig(model="test", block_size=block_size, num_blocks=overrides.pop("num_blocks", 2048), **overrides)
    engine = LLMEngine(config, model=model, tokenizer=tokenizer)
    outputs = engine.generate(prompts, params)
    return outputs, engine


@pytest.fixture(scope="module")
def llama_case():
    model, reference = tiny_llama()
    prompts = random_prompts(16, 512, shared_prefix=40)
    expected = [hf_greedy(reference, p, GREEDY.max_tokens) for p in prompts]
    return model, prompts, expected


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_tiny_llama_matches_hf(llama_case, variant):
    model, prompts, expected = llama_case
    outputs, engine = run_engine(model, None, prompts, **dict(VARIANTS[variant]))
    assert outputs == expected
    if variant == "preempting":
        assert engine.scheduler.num_preemptions > 0
    if variant == "default":
        assert engine.block_manager.prefix_hit_tokens > 0  # the shared prefix was reused
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks  # nothing leaked


def test_tiny_gemma3_sliding_window_matches_hf():
    model, reference = tiny_gemma3(sliding_window=16)
    prompts = random_prompts(6, 512, shared_prefix=24, seed=3)
    expected = [hf_greedy(reference, p, 20) for p in prompts]
    params = SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True)
    for overrides in ({}, {"max_num_batched_tokens": 5}):
        outputs, _ = run_engine(model, None, prompts, params, **overrides)
        assert outputs == expected


SMOL_PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Write a haiku about the sea.",
    "1, 2, 3, 4,",
    "Translate to French: good morning, my friend.",
    "The three primary colours are",
    "Q: What is 12 times 12?\nA:",
    "Once upon a time, in a small village by the mountains, there lived an old clockmaker who",
    "import numpy as np\n\ndef normalise(x):",
    "A list of fruits: apple, banana,",
    "The quick brown fox",
    "In machine learning, overfitting means",
    "Dear hiring manager, I am writing to apply for",
    "SELECT name, email FROM users WHERE",
    "The boiling point of water at sea level is",
    "Here is a short story about a robot who learns to paint. " * 6,
]


@pytest.fixture(scope="module")
def smol_case():
    model, reference, tokenizer = bundled("smollm2-135m")
    system = "You are a concise assistant. Answer in one sentence. " * 4
    prompts = [tokenizer.encode((system if i % 2 else "") + text) for i, text in enumerate(SMOL_PROMPTS)]
    expected = [hf_greedy(reference, p, 16) for p in prompts]
    return model, tokenizer, prompts, expected


@pytest.mark.parametrize("variant", ["default", "chunked", "preempting"])
def test_smollm2_matches_hf(smol_case, variant):
    model, tokenizer, prompts, expected = smol_case
    params = SamplingParams(max_tokens=16, temperature=0.0, ignore_eos=True)
    overrides = dict(VARIANTS[variant])
    if variant == "preempting":
        overrides["num_blocks"] = 24
    outputs, engine = run_engine(model, tokenizer, prompts, params, block_size=16, **overrides)
    assert outputs == expected
    if variant == "preempting":
        assert engine.scheduler.num_preemptions > 0


def test_gemma3_matches_hf():
    model, reference, tokenizer = bundled("gemma3-270m")
    prompts = [tokenizer.encode(t) for t in ("The capital of Japan is", "def add(a, b):", "Roses are red,")]
    expected = [hf_greedy(reference, p, 8) for p in prompts]
    outputs, _ = run_engine(model, tokenizer, prompts, SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True),
                            block_size=16)
    assert outputs == expected
