"""Models for engine tests: tiny random transformers models built here, and the bundled
SmolLM2 / Gemma 3, each paired with an HF reference copy using stock attention."""
from __future__ import annotations

import functools

import torch
from transformers import (AutoTokenizer, Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig,
                          LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

from backends.engine.model.model_runner import ATTN_IMPLEMENTATION, load_model
from backends.engine.model.models import model_dir


def _pair(cls, config, seed: int):
    torch.manual_seed(seed)
    config._attn_implementation = "eager"
    reference = cls(config).eval()
    engine_config = config.__class__(**config.to_dict())
    engine_config._attn_implementation = ATTN_IMPLEMENTATION
    model = cls(engine_config).eval()
    model.load_state_dict(reference.state_dict())
    return model, reference


def tiny_llama():
    config = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         eos_token_id=None, bos_token_id=None, pad_token_id=None)
    return _pair(LlamaForCausalLM, config, seed=0)


def tiny_qwen(version: int):
    """Qwen2 (biased q/k/v) or Qwen3 (per-head q/k norms), the shapes of tiny_llama."""
    config_class, model_class = {2: (Qwen2Config, Qwen2ForCausalLM), 3: (Qwen3Config, Qwen3ForCausalLM)}[version]
    config = config_class(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, head_dim=16,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                          eos_token_id=None, bos_token_id=None, pad_token_id=None)
    return _pair(model_class, config, seed=version)


def tiny_gemma3(sliding_window: int = 16):
    config = Gemma3TextConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                              sliding_window=sliding_window, max_position_embeddings=1024,
                              layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
                              eos_token_id=None, bos_token_id=None, pad_token_id=None)
    return _pair(Gemma3ForCausalLM, config, seed=1)


def tiny_gemma2(sliding_window: int = 8, softcap: float = 0.5):
    """Gemma 2 passes attention softcap to the attention function (Gemma 3 does not)."""
    config = Gemma2Config(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=sliding_window,
                          attn_logit_softcapping=softcap, max_position_embeddings=1024,
                          layer_types=["sliding_attention", "full_attention"],
                          eos_token_id=None, bos_token_id=None, pad_token_id=None)
    return _pair(Gemma2ForCausalLM, config, seed=2)


@functools.lru_cache(maxsize=None)
def bundled(name: str):
    """(engine model, HF reference model, tokenizer) for a prepared bundled model."""
    path = model_dir(name)
    model = load_model(path)
    reference = load_model(path)
    reference.set_attn_implementation("sdpa")
    return model, reference, AutoTokenizer.from_pretrained(path)


@torch.inference_mode()
def hf_greedy(reference, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """Hugging Face `generate`, one prompt at a time so no padding enters the reference."""
    out = reference.generate(torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
                             max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens, do_sample=False,
                             eos_token_id=None, pad_token_id=0)
    return out[0, len(prompt_ids):].tolist()
