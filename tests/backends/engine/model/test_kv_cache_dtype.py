"""A bf16 KV pool under an fp32 model (--kv-cache-dtype bfloat16): half the bytes per cached
token, attention over the rounded K/V, and the same tokens from compiled and eager steps."""
from __future__ import annotations

import pytest
import torch

from backends.engine import EngineConfig, SamplingParams
from backends.engine.device_defaults import defaults_for
from backends.engine.model.device import resolve_kv_dtype
from backends.engine.core.llm_engine import LLMEngine
from kernels.paged_attention import AttentionMetadata, PrefillChunk, paged_attention

from tests.support.prompts import random_prompts

from tests.kernels.attention_reference import dense_reference
from tests.backends.models import tiny_llama

# whether each device serves a pool narrower than the model, as its plan reads it
CPU, CUDA = defaults_for("cpu").narrow_kv_pool, defaults_for("cuda").narrow_kv_pool


def test_the_pool_dtype_is_the_models_unless_bf16_is_asked_for_on_the_cpu():
    assert resolve_kv_dtype(None, torch.float32, CPU) == torch.float32
    assert resolve_kv_dtype("auto", torch.bfloat16, CUDA) == torch.bfloat16
    assert resolve_kv_dtype("bfloat16", torch.float32, CPU) == torch.bfloat16
    with pytest.raises(ValueError, match="CPU only"):
        resolve_kv_dtype("bfloat16", torch.float32, CUDA)
    with pytest.raises(ValueError, match="not 'int3'"):
        resolve_kv_dtype("int3", torch.float32, CPU)


def test_attention_reads_the_rounded_keys_and_values_of_a_bf16_pool():
    """One prompt chunk on top of 9 cached tokens, then a decode of another sequence: both see
    exactly the bf16-rounded K/V, computed in fp32."""
    torch.manual_seed(0)
    heads, kv_heads, dim, bs = 4, 2, 16, 4
    k_cache = torch.zeros(16, bs, kv_heads, dim, dtype=torch.bfloat16)
    v_cache = torch.zeros_like(k_cache)
    k, v = torch.randn(14, kv_heads, dim), torch.randn(14, kv_heads, dim)
    table = torch.tensor([5, 2, 9, 12])
    for p in range(9):  # cached before this step
        k_cache[table[p // bs], p % bs], v_cache[table[p // bs], p % bs] = k[p], v[p]
    decode_table = torch.tensor([[7, 3]])
    dk, dv = torch.randn(6, kv_heads, dim), torch.randn(6, kv_heads, dim)
    for p in range(5):
        k_cache[decode_table[0, p // bs], p % bs], v_cache[decode_table[0, p // bs], p % bs] = dk[p], dv[p]
    slots = [int(table[p // bs]) * bs + p % bs for p in range(9, 14)] + [3 * bs + 1]
    meta = AttentionMetadata(torch.tensor(slots), [PrefillChunk(0, 5, 14, table)], decode_index=torch.tensor([5]),
                             decode_block_tables=decode_table, decode_context_lens=torch.tensor([6]))
    q = torch.randn(6, heads, dim)
    out = paged_attention(q, torch.cat([k[9:], dk[5:]]), torch.cat([v[9:], dv[5:]]), k_cache, v_cache, meta, 0.25)
    assert out.dtype == torch.float32
    rounded = lambda t: t.to(torch.bfloat16).float()  # noqa: E731
    torch.testing.assert_close(out[:5], dense_reference(q[:5], rounded(k), rounded(v), 0.25, None), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[5:], dense_reference(q[5:], rounded(dk), rounded(dv), 0.25, None), atol=1e-5, rtol=1e-5)


def engine(model, **overrides) -> LLMEngine:
    config = EngineConfig(**{"model": "test", "block_size": 4, "kv_cache_bytes": 1 << 20, "max_num_seqs": 8,
                             "max_num_batched_tokens": 64, **overrides})
    return LLMEngine(config, model=model)


@pytest.mark.slow  # compiled decode packages (AOTInductor)
def test_a_bf16_pool_holds_twice_the_blocks_and_compiled_steps_match_eager_ones():
    model, _ = tiny_llama()
    fp32, bf16 = engine(model), engine(model, kv_cache_dtype="bfloat16")
    assert bf16.runner.kv_caches[0][0].dtype == torch.bfloat16
    assert bf16.runner.num_blocks == 2 * fp32.runner.num_blocks
    prompts = random_prompts(5, 512, shared_prefix=8, seed=7)
    params = [SamplingParams(max_tokens=6 + i, temperature=0.0, ignore_eos=True) for i in range(len(prompts))]
    eager = bf16.generate(prompts, params)
    assert [len(out) for out in eager] == [p.max_tokens for p in params]
    compiled = engine(model, kv_cache_dtype="bfloat16", compile_decode=True)
    assert compiled.generate(prompts, params) == eager
