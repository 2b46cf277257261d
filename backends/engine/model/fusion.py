"""Fewer, fuller kernels for a loaded transformers model, without forking its code (fuse_model).

For the decoder families recognised here (Llama, which covers SmolLM2 and Llama 3.x; Qwen2;
Qwen3), modules are changed in place:
- each RMSNorm runs one kernel instead of HF's half dozen;
- the decoder layer's forward is ours: the residual add after attention and the next RMSNorm are
  one kernel (add_rms_norm). The add at the end of the layer stays a plain add: fusing it into
  the next layer's norm would pass (hidden, residual) pairs between layers, which means owning
  the model's forward too (masks, rotary, output capture), far more of HF's code to track;
- the attention module's forward is ours: q/k/v are one merged Linear whose output is split, and
  rotary is one kernel on both q and k. Routing through our forward rather than patching the
  modeling module's apply_rotary_pos_emb keeps the change on the fused instances (a patched
  module global would reach every model of the family in the process, reference models too);
- the MLP: gate|up one merged Linear, then SiLU-and-mul, then down_proj.

Modules keep their identity: each one's class is swapped for a subclass that overrides forward,
so attributes (layer_idx, scaling, the paged pool the runner binds) and isinstance checks hold.
Only plain nn.Linear siblings are merged; quantized ones (engine/quant/quantize.py) run as they are.
`ops` is the kernel set (kernels/fused_reference.py): Triton on CUDA, torch on CPU.
"""
from __future__ import annotations

import logging
import sys
from functools import cache

import torch
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from kernels.fused_reference import FusedOps

log = logging.getLogger("tiergate.fusion")
FAMILIES = ("llama", "qwen2", "qwen3")  # transformers model folders whose decoder layers we know
_logged: set[str] = set()


class FusedNorm:
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fused_ops.rms_norm(x, self.weight, self.variance_epsilon)


class FusedMLP:
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.fused_ops.silu_and_mul(self.gate_up_proj(x)))


class FusedAttention:
    def forward(self, hidden_states, position_embeddings, attention_mask=None, past_key_values=None, **kwargs):
        shape = hidden_states.shape[:-1]
        if hasattr(self, "qkv_proj"):
            q, k, v = self.qkv_proj(hidden_states).split(self.qkv_sizes, dim=-1)
        else:  # quantized projections stay separate
            q, k, v = self.q_proj(hidden_states), self.k_proj(hidden_states), self.v_proj(hidden_states)
        q, k, v = (t.view(*shape, -1, self.head_dim) for t in (q, k, v))
        if hasattr(self, "q_norm"):  # Qwen3 normalises each head before rotary
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = self.fused_ops.rotary(q, k, *position_embeddings)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, self.layer_idx)
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, self.fused_eager)
        out, weights = attend(self, q, k, v, attention_mask, dropout=0.0, scaling=self.scaling,
                              sliding_window=getattr(self, "sliding_window", None), **kwargs)
        return self.o_proj(out.reshape(*shape, -1).contiguous()), weights


class FusedDecoderLayer:
    def forward(self, hidden_states, attention_mask=None, position_ids=None, past_key_values=None, use_cache=False,
                position_embeddings=None, **kwargs):
        residual = hidden_states
        hidden_states, _ = self.self_attn(hidden_states=self.input_layernorm(hidden_states), attention_mask=attention_mask,
                                          position_ids=position_ids, past_key_values=past_key_values,
                                          use_cache=use_cache, position_embeddings=position_embeddings, **kwargs)
        norm = self.post_attention_layernorm
        hidden_states, residual = self.fused_ops.add_rms_norm(hidden_states, residual, norm.weight,
                                                              norm.variance_epsilon)
        return residual + self.mlp(hidden_states)


@cache
def _fused_class(mixin: type, base: type) -> type:
    return type(f"Fused{base.__name__}", (mixin, base), {"fused_base": base})


def _swap(module: nn.Module, mixin: type, ops: FusedOps) -> None:
    if not isinstance(module, mixin):
        module.__class__ = _fused_class(mixin, type(module))
    module.fused_ops = ops


def _merge(module: nn.Module, names: tuple[str, ...], merged_name: str) -> tuple[int, ...] | None:
    """Replace the plain nn.Linear siblings `names` by one Linear `merged_name` (outputs
    concatenated in that order); returns their output widths, or None when they cannot merge."""
    layers = [getattr(module, name) for name in names]
    if any(type(layer) is not nn.Linear or layer.weight.is_meta for layer in layers):
        return None  # quantized, or not loaded yet
    if len({(layer.in_features, layer.bias is None, layer.weight.dtype, layer.weight.device) for layer in layers}) != 1:
        return None
    first = layers[0]
    merged = nn.Linear(first.in_features, sum(layer.out_features for layer in layers), bias=first.bias is not None,
                       device="meta")
    merged.weight = nn.Parameter(torch.cat([layer.weight.data for layer in layers]), requires_grad=False)
    if first.bias is not None:
        merged.bias = nn.Parameter(torch.cat([layer.bias.data for layer in layers]), requires_grad=False)
    for name in names:
        delattr(module, name)
    setattr(module, merged_name, merged)
    return tuple(layer.out_features for layer in layers)


def _family_classes(family: str) -> dict[str, type]:
    prefix = {"llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3"}[family]
    module = sys.modules.get(f"transformers.models.{family}.modeling_{family}")
    if module is None:  # never imported: no model of the family was built
        return {}
    return {part: getattr(module, f"{prefix}{part}") for part in ("DecoderLayer", "Attention", "MLP", "RMSNorm")}


def _base(module: nn.Module) -> type:
    """The module's HF class, fused or not."""
    return getattr(type(module), "fused_base", type(module))


def _known(layer: nn.Module) -> dict[str, type] | None:
    """The classes of the layer's family when the layer and its parts are exactly HF's classes of
    a family we know (a subclass may have changed the forward we replace)."""
    for family in FAMILIES:
        classes = _family_classes(family)
        if classes and _base(layer) is classes["DecoderLayer"]:
            parts = ((layer.self_attn, "Attention"), (layer.mlp, "MLP"), (layer.input_layernorm, "RMSNorm"),
                     (layer.post_attention_layernorm, "RMSNorm"))
            return classes if all(_base(module) is classes[part] for module, part in parts) else None
    return None


def _fuse_layer(layer: nn.Module, ops: FusedOps) -> None:
    attention, mlp = layer.self_attn, layer.mlp
    if not isinstance(attention, FusedAttention):
        attention.fused_eager = sys.modules[type(attention).__module__].eager_attention_forward
        sizes = _merge(attention, ("q_proj", "k_proj", "v_proj"), "qkv_proj")
        if sizes is not None:
            attention.qkv_sizes = sizes
    _swap(attention, FusedAttention, ops)
    if isinstance(mlp, FusedMLP) or (getattr(mlp.config, "hidden_act", None) == "silu"
                                     and _merge(mlp, ("gate_proj", "up_proj"), "gate_up_proj")):
        _swap(mlp, FusedMLP, ops)
    _swap(layer, FusedDecoderLayer, ops)


def fuse_model(model: nn.Module, ops: FusedOps, explicit: bool = False) -> int:
    """Fuse `model` in place with the kernel set `ops`; returns the decoder layers fused. A model
    with none of ours is left as it is, logged once; with `explicit` (the operator asked for fusion)
    it is refused by name instead. Running it again only rebinds `ops`."""
    fused = 0
    norms: set[type] = set()
    for module in list(model.modules()):
        classes = _known(module)
        if classes is not None:
            _fuse_layer(module, ops)
            norms.add(classes["RMSNorm"])
            fused += 1
    name = type(model).__name__
    if not fused:
        if explicit:
            raise ValueError(f"fuse_kernels (--fuse-kernels): {name} has no decoder layers the engine fuses "
                             f"({', '.join(FAMILIES)}); leave the setting unset or off for this model")
        if name not in _logged:
            _logged.add(name)
            log.info("kernel fusion: %s is not a family the engine fuses (%s); it runs as loaded", name,
                     ", ".join(FAMILIES))
        return 0
    for module in list(model.modules()):
        if isinstance(module, tuple(norms)):
            _swap(module, FusedNorm, ops)
    log.info("kernel fusion: %d decoder layers of %s on %s kernels", fused, name, ops.name)
    return fused
