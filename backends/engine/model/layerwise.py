"""An int4 model built one decoder layer at a time, with no dense copy of its projections.

A 70B model's bf16 weights (140 GB) fit no single GPU, but its int4 codes (about 40 GB with
their scales) do; so the model is made as a skeleton on the meta device, and each decoder
layer is then given int4 codes and scales straight on the target device, its other weights
(norms) in the model's dtype. Peak memory is the finished model plus one layer's transients.
Each meta nn.Linear is replaced by `Int4Linear.from_codes` (quantize.py), the step a
pre-quantised checkpoint feeds its own codes to (int4_checkpoints.py); `random_int4_model`
feeds random codes, for throughput runs of real shapes (benchmarks/engine_models.py).
"""
from __future__ import annotations

import copy

import torch
from torch import nn
from transformers import AutoModelForCausalLM, PretrainedConfig, PreTrainedModel

from .model_runner import ATTN_IMPLEMENTATION
from ..quant.int4_kernels import RowTable
from ..quant.quantize import Int4Linear, Kernel, layer_int4_kernel

INIT_STD = 0.02  # the std of the dense weights (embeddings, LM head) a random model gets
# random codes q in 0..15 read w = (q - 8) * scale, so w's std is about 4.6 scales: ~0.02
RANDOM_SCALE = 0.004


def meta_skeleton(config: PretrainedConfig, dtype: torch.dtype,
                  attn_implementation: str = ATTN_IMPLEMENTATION) -> PreTrainedModel:
    """The model's modules with every weight on the meta device: no memory, only shapes."""
    config = copy.deepcopy(config)
    config._attn_implementation = attn_implementation
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval()


def _random_int4(linear: nn.Linear, group_size: int, kernel: Kernel | None, device: torch.device,
                 generator: torch.Generator, table: RowTable | None) -> Int4Linear:
    kernel = layer_int4_kernel(linear, group_size, kernel, device)
    shape, groups = (linear.out_features, linear.in_features), (linear.out_features, linear.in_features // group_size)
    code_dtype = torch.int32 if kernel == Kernel.ATEN else torch.uint8  # aten's packer takes int32 only
    codes = torch.randint(0, 16, shape, dtype=code_dtype, device=device, generator=generator)
    scales = RANDOM_SCALE * (0.5 + torch.rand(groups, device=device, generator=generator))
    return Int4Linear.from_codes(linear, codes, scales, -8 * scales, group_size, kernel, table=table)


def _materialize_rest(module: nn.Module, device: torch.device, dtype: torch.dtype, generator: torch.Generator) -> None:
    """Every weight of `module` still on meta, in `dtype` on `device`: 1-d weights (norms) ones,
    biases zeros, the others (embeddings, heads) small random values. A weight shared by two
    modules (a tied head) is made once."""
    made: dict[int, nn.Parameter] = {}
    for owner in module.modules():
        for name, param in list(owner.named_parameters(recurse=False)):
            if not param.is_meta:
                continue
            if id(param) in made:
                owner._parameters[name] = made[id(param)]
                continue
            if name == "bias":
                value = torch.zeros(param.shape, dtype=dtype, device=device)
            elif param.dim() == 1:
                value = torch.ones(param.shape, dtype=dtype, device=device)
            else:
                value = torch.randn(param.shape, dtype=dtype, device=device, generator=generator).mul_(INIT_STD)
            owner._parameters[name] = made[id(param)] = nn.Parameter(value, requires_grad=False)


def _rebuild_rotary(model: nn.Module, device: torch.device) -> None:
    """Rotary tables are buffers computed at construction, so on meta they hold nothing: build
    each such module again for real (it is a few KB)."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if any(b.is_meta for b in child.buffers(recurse=False)) and type(child).__name__.endswith("RotaryEmbedding"):
                setattr(parent, name, type(child)(config=child.config).to(device))


def random_int4_model(config: PretrainedConfig, device: torch.device, dtype: torch.dtype, group_size: int,
                      seed: int, kernel: Kernel | None = None, table: RowTable | None = None) -> PreTrainedModel:
    """`config`'s architecture with random int4 codes in every decoder nn.Linear (group_size per
    scale), the rest in `dtype`; built layer by layer on `device`, never whole in dense. `table`:
    the CUDA layers' int4 row table (Int4Linear's; a one-kernel table keeps one packing)."""
    device = torch.device(device)
    generator = torch.Generator(device=device).manual_seed(seed)
    model = meta_skeleton(config, dtype)
    for layer in model.get_decoder().layers:
        for parent in list(layer.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.Linear):
                    setattr(parent, name, _random_int4(child, group_size, kernel, device, generator, table))
        _materialize_rest(layer, device, dtype, generator)
    _materialize_rest(model, device, dtype, generator)  # embeddings, final norm, LM head
    if config.tie_word_embeddings:
        model.tie_weights()
    _rebuild_rotary(model, device)
    left = [name for name, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left:
        raise ValueError(f"left on the meta device: {left[:5]}")
    return model
