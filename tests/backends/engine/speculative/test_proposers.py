"""Speculative decoding: greedy output identical to plain decoding; sampling preserves the
target distribution exactly."""
import copy

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from backends.engine import EngineConfig, SamplingParams
from backends.engine.core.llm_engine import LLMEngine
from kernels.speculative import verify_sampled
from tests.backends.models import ATTN_IMPLEMENTATION, bundled, hf_greedy, tiny_llama
from tests.support.prompts import repetitive_prompts

pytestmark = pytest.mark.slow  # draft and target models through the whole engine

GREEDY = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)


def other_tiny_draft():
    """A different (smaller) random model with the same vocabulary: a weak drafter."""
    config = LlamaConfig(vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024)
    config._attn_implementation = ATTN_IMPLEMENTATION
    torch.manual_seed(5)
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def case():
    model, reference = tiny_llama()
    prompts = repetitive_prompts(10)
    return model, prompts, [hf_greedy(reference, p, GREEDY.max_tokens) for p in prompts]


@pytest.mark.parametrize("method, draft", [("ngram", None), ("draft", "same"), ("draft", "other")])
@pytest.mark.parametrize("num_blocks", [2048, 30])  # 30 blocks force preemption
# on a GPU: the CUDA plan itself (Triton attention, graphs for the plain decode steps, sampling there)
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_greedy_speculation_equals_plain_decoding(case, method, draft, num_blocks, device):
    model, prompts, expected = case
    model = model if device == "cpu" else copy.deepcopy(model).to(device)
    draft_model = {"same": lambda: copy.deepcopy(model), "other": other_tiny_draft, None: lambda: None}[draft]()
    draft_model = draft_model.to(device) if draft_model is not None else None
    config = EngineConfig(model="test", block_size=8, num_blocks=num_blocks, speculative=method, num_speculative_tokens=4,
                          device=device)
    engine = LLMEngine(config, model=model, draft_model=draft_model)
    assert engine.generate(prompts, GREEDY) == expected
    stats = engine.spec_stats
    assert stats.draft_tokens > 0
    if draft == "same":
        assert stats.acceptance_rate() == 1.0  # a draft identical to the target is always right
    if num_blocks == 30:
        assert engine.scheduler.num_preemptions > 0
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


def test_smollm2_ngram_speculation_equals_plain_decoding():
    model, _, tokenizer = bundled("smollm2-135m")
    text = ("The meeting moved from Tuesday to Thursday because the projector was broken. "
            "Everyone agreed that the new date works, and the minutes will be sent by Friday.")
    prompts = [tokenizer.encode(f"Text: {text}\nRepeat the text exactly:\n"),
               tokenizer.encode(f"{text}\nQuote the second sentence: \"")]
    params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    plain = LLMEngine(EngineConfig(model="s"), model=model, tokenizer=tokenizer).generate(prompts, params)
    spec = LLMEngine(EngineConfig(model="s", speculative="ngram"), model=model, tokenizer=tokenizer)
    assert spec.generate(prompts, params) == plain
    assert spec.spec_stats.accepted_tokens > 0


def _output_distribution(samples: int, target: torch.Tensor, draft_probs: torch.Tensor | None, seed: int):
    """Empirical distribution of the first emitted token over many verifications."""
    gen = torch.Generator().manual_seed(seed)
    counts = torch.zeros(target.shape[1])
    for _ in range(samples):
        if draft_probs is None:
            draft = [2, 2, 2]  # a fixed guess, like n-gram lookup
        else:
            draft = [int(torch.multinomial(draft_probs[i], 1, generator=gen)) for i in range(draft_probs.shape[0])]
        counts[verify_sampled(target, draft, draft_probs, gen)[0]] += 1
    return counts / samples


@pytest.mark.parametrize("point_mass", [False, True])
def test_rejection_sampling_preserves_the_target_distribution(point_mass):
    torch.manual_seed(0)
    vocab, k = 6, 3
    target = torch.softmax(torch.randn(k + 1, vocab) * 1.5, dim=-1)
    draft_probs = None if point_mass else torch.softmax(torch.randn(k, vocab) * 1.5, dim=-1)
    distances = []
    for samples in (400, 6400):
        empirical = _output_distribution(samples, target, draft_probs, seed=samples)
        distances.append(0.5 * (empirical - target[0]).abs().sum().item())
    # TV distance of an empirical distribution shrinks like sqrt(vocab / samples)
    assert distances[1] < 0.03, distances
    assert distances[1] < distances[0], distances


async def test_streamed_speculative_text_equals_plain_text():
    """Several tokens can arrive in one step; the stream must carry all of them, and only
    the last delta may say the sequence finished."""
    from backends.engine.core.async_engine import AsyncEngine

    model, _, tokenizer = bundled("smollm2-135m")
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Repeat exactly: the cat sat on the mat."}],
                                           add_generation_prompt=True, tokenize=True, return_dict=False)
    params = SamplingParams(max_tokens=16, temperature=0.0)
    plain = LLMEngine(EngineConfig(model="s"), model=model, tokenizer=tokenizer).generate([list(prompt)], params)[0]
    engine = AsyncEngine(LLMEngine(EngineConfig(model="s", speculative="ngram"), model=model, tokenizer=tokenizer))
    try:
        deltas = [d async for d in engine.generate(list(prompt), params)]
    finally:
        engine.shutdown()
    assert [t for d in deltas for t in d.token_ids] == plain
    assert "".join(d.text for d in deltas) == tokenizer.decode(plain, skip_special_tokens=True)
    assert [d.finished for d in deltas] == [False] * (len(deltas) - 1) + [True]
    assert engine.core.spec_stats.accepted_tokens > 0
