"""An int4 model built layer by layer (engine/model/layerwise.py): nothing left on meta, every decoder
projection int4, the engine serves it, and the build never holds a dense projection weight nor
more than one layer's worth of memory beside the finished model."""
from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from transformers import LlamaConfig

from backends.engine import EngineConfig, SamplingParams
from backends.engine.model.device import tensor_bytes
from backends.engine.model.layerwise import random_int4_model
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.quant.quantize import Int4Linear, Kernel

CONFIG = dict(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, head_dim=64, max_position_embeddings=1024, tie_word_embeddings=False,
              eos_token_id=None, bos_token_id=None, pad_token_id=None)
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class StorageLedger(TorchDispatchMode):
    """Every real (non-meta) storage an op creates while active: live bytes, their peak, and the
    shapes and dtypes created. A storage is counted until it is freed (weakref on the storage)."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0
        self.open: set[int] = set()
        self.created: list[tuple[tuple[int, ...], torch.dtype]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or t.is_meta:
                continue
            storage = t.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
            if size and key not in self.open:
                self.open.add(key)
                self.live += size
                self.peak = max(self.peak, self.live)
                self.created.append((tuple(t.shape), t.dtype))
                weakref.finalize(storage, self._freed, key, size)
        return out

    def _freed(self, key: int, size: int) -> None:
        self.live -= size
        self.open.discard(key)


def _dense_layer_bytes(config: LlamaConfig, dtype: torch.dtype) -> int:
    h, i, kv = config.hidden_size, config.intermediate_size, config.num_key_value_heads * config.head_dim
    return (2 * h * h + 2 * kv * h + 3 * i * h) * torch.finfo(dtype).bits // 8


def test_build_is_int4_layer_by_layer_and_serves():
    config = LlamaConfig(**CONFIG)
    with StorageLedger() as ledger:
        model = random_int4_model(config, torch.device("cpu"), torch.float32, 32, seed=0, kernel=Kernel.ATEN)
    assert not [name for name, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    layers = model.get_decoder().layers
    assert all(isinstance(getattr(layer.self_attn if name.endswith(("q_proj", "k_proj", "v_proj", "o_proj"))
                                  else layer.mlp, name), Int4Linear) for layer in layers for name in PROJECTIONS)
    assert not any(type(m) is torch.nn.Linear for m in layers.modules())
    # no projection's weight was ever made dense (codes are integers; a dense copy is floating point)
    shapes = {(m.out_features, m.in_features) for m in layers.modules() if isinstance(m, Int4Linear)}
    assert not [c for c in ledger.created if c[0] in shapes and c[1].is_floating_point]
    # peak = the finished model + at most one dense layer's bytes of transients (codes, packing)
    final = tensor_bytes([*model.parameters(), *model.buffers()])
    assert ledger.peak <= final + _dense_layer_bytes(config, torch.float32), (ledger.peak, final)
    int4_layers = tensor_bytes([*layers.parameters(), *layers.buffers()])
    assert int4_layers < config.num_hidden_layers * _dense_layer_bytes(config, torch.float32) / 4

    engine = LLMEngine(EngineConfig(model="random-int4", num_blocks=64, max_num_seqs=4), model=model)
    out = engine.generate([[1, 2, 3, 4], [5, 6]], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))
    assert [len(o) for o in out] == [6, 6]
    assert all(0 <= t < config.vocab_size for o in out for t in o)
