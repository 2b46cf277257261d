"""Randomly initialised models of real architectures for `benchmarks.engine --model ...`.

Throughput and bandwidth depend on the shapes, not on the weights' values, so a GPU run needs
no checkpoint: the config dicts below are Llama 3.2's published 1B and 3B shapes and Llama
3.1's 70B (rope scaling left out: it changes no cost), plus a tiny one for smoke runs on CPU.
The same seed builds identical weights for the engine and for the HF static-batching peer.
`random_int4_model` builds int4 ones layer by layer (backends/engine/model/layerwise.py): the 70B's
bf16 weights would not fit one GPU, its int4 codes do.
"""
from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from backends.engine.model.layerwise import random_int4_model as build_int4
from backends.engine.model.model_runner import ATTN_IMPLEMENTATION
from backends.engine.quant.int4_kernels import RowTable
from backends.engine.quant.quantize import Kernel

_LLAMA_3 = dict(vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5,
                tie_word_embeddings=True, bos_token_id=128000, eos_token_id=128001)
ARCHITECTURES = {
    "llama-3.2-1b": dict(_LLAMA_3, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=64),
    "llama-3.2-3b": dict(_LLAMA_3, hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
                         num_attention_heads=24, num_key_value_heads=8, head_dim=128),
    "llama-3.1-70b": dict(_LLAMA_3, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                          num_attention_heads=64, num_key_value_heads=8, head_dim=128, tie_word_embeddings=False),
    "tiny": dict(vocab_size=2048, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, max_position_embeddings=4096, tie_word_embeddings=True),
}


def random_model(name: str, device: torch.device, dtype: torch.dtype, seed: int,
                 attn_implementation: str = ATTN_IMPLEMENTATION) -> LlamaForCausalLM:
    """Built straight on `device` (a 3B fp32 init on the host would take minutes)."""
    config = LlamaConfig(**ARCHITECTURES[name])
    config._attn_implementation = attn_implementation
    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(config)
    return model.to(dtype).eval()


def random_int4_model(name: str, device: torch.device, dtype: torch.dtype, group_size: int, seed: int,
                      kernel: Kernel | None = None, table: RowTable | None = None) -> LlamaForCausalLM:
    """Random int4 codes in every decoder projection (groups of `group_size`), embeddings, norms and
    LM head in `dtype`; peak memory is the model plus one layer, never a dense copy."""
    return build_int4(LlamaConfig(**ARCHITECTURES[name]), device, dtype, group_size, seed, kernel, table)


def random_prompt(rng, vocab_size: int, length: int) -> list[int]:
    """Prompt ids for a random-weight model: any ids in its vocabulary serve."""
    return [rng.randrange(vocab_size) for _ in range(length)]
