"""Int4 checkpoints made for GPUs, served on our Int4Linear layers with their own codes, scales
and zeros: AutoAWQ's GEMM format and AutoGPTQ / GPTQModel's "gptq" format (v1; v2 too).

Both store w = (q - z) * s per group of `group_size` input features, with 4-bit codes and
zeros packed eight to an int32 and fp16 scales [in / group, out]:

- AWQ GEMM: qweight [in, out / 8] and qzeros [in / group, out / 8] packed along out, nibble i
  of a word holding column AWQ_ORDER[i] of its eight;
- GPTQ: qweight [in / 8, out] packed along in, qzeros [in / group, out / 8] along out, both
  nibble i = element i (lowest bits first); format v1 stores each zero as z - 1; g_idx must be
  the plain i // group (anything else is act-order).

Our layout is codes [out, in] with w = q * scale + min, so scale = s and min = -z * s. The
model is built with its parameters on the meta device; each quantised layer is unpacked on its
own and replaced, so no fp copy of the quantised weights ever exists in full.
"""
from __future__ import annotations

import json
import logging
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from .quantize import Int4Linear, Kernel, layer_int4_kernel

log = logging.getLogger("tiergate.int4_checkpoints")
METHODS = ("awq", "gptq")
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # AutoAWQ's GEMM interleave: nibble i holds column AWQ_ORDER[i]
AWQ_UNDO = tuple(sorted(range(8), key=AWQ_ORDER.__getitem__))  # column j lies in nibble AWQ_UNDO[j]
GPTQ_ZERO_OFFSET = {"gptq": 1, "gptq_v2": 0}  # checkpoint_format -> what to add to a stored zero
PACKED_PARTS = ("qweight", "qzeros", "scales", "g_idx", "bias")


@dataclass(frozen=True)
class Int4Format:
    method: str  # "awq" | "gptq"
    group_size: int
    zero_offset: int  # added to each stored zero


def int4_format(config: dict) -> Int4Format | None:
    """The int4 format a config.json's quantization_config names; None without one. ValueError,
    naming the setting, for anything else: other methods or bits, AWQ other than GEMM, act-order."""
    quant = config.get("quantization_config")
    if not quant:
        return None
    method = str(quant.get("quant_method", "")).lower()
    if method not in METHODS:
        raise ValueError(f"quantization_config.quant_method {method!r} is not served: int4 checkpoints load "
                         f"from {METHODS} only")
    bits = quant.get("bits", quant.get("w_bit"))
    if bits != 4:
        raise ValueError(f"quantization_config bits={bits} ({method}) is not served: only 4-bit checkpoints load")
    group = quant.get("group_size", quant.get("q_group_size"))
    if method == "awq":
        version = str(quant.get("version", "gemm")).lower()
        if version != "gemm":
            raise ValueError(f"quantization_config.version {version!r} (awq) is not served: only AWQ's GEMM layout loads")
        if quant.get("zero_point") is False:
            raise ValueError("quantization_config.zero_point false (awq) is not served: only AWQ with zero points loads")
        return Int4Format(method, group, 0)
    if quant.get("desc_act") or quant.get("act_order"):
        raise ValueError("quantization_config.desc_act true (GPTQ act-order) is not served: its groups do not follow "
                         "the input order; use a checkpoint quantised with desc_act false")
    checkpoint_format = str(quant.get("checkpoint_format", "gptq")).lower()
    if checkpoint_format not in GPTQ_ZERO_OFFSET:
        raise ValueError(f"quantization_config.checkpoint_format {checkpoint_format!r} (gptq) is not served: "
                         f"only {tuple(GPTQ_ZERO_OFFSET)} load")
    return Int4Format(method, group, GPTQ_ZERO_OFFSET[checkpoint_format])


def folder_format(path) -> Int4Format | None:
    config = Path(path) / "config.json"
    return int4_format(json.loads(config.read_text(encoding="utf-8"))) if config.exists() else None


def _nibbles(packed: torch.Tensor) -> torch.Tensor:
    """int32 [..., c] -> int32 [..., c, 8]: the eight 4-bit fields of each word, lowest bits first."""
    shifts = torch.arange(0, 32, 4, dtype=torch.int32, device=packed.device)
    return (packed.to(torch.int32)[..., None] >> shifts) & 15  # arithmetic shift: the mask drops the sign


def unpack_awq(packed: torch.Tensor) -> torch.Tensor:
    """AWQ GEMM int32 [r, c / 8] -> int32 [r, c], columns back in order."""
    return _nibbles(packed)[..., list(AWQ_UNDO)].flatten(-2)


def unpack_along_columns(packed: torch.Tensor) -> torch.Tensor:
    """GPTQ qzeros: int32 [r, c / 8] -> [r, c], eight consecutive columns a word."""
    return _nibbles(packed).flatten(-2)


def unpack_along_rows(packed: torch.Tensor) -> torch.Tensor:
    """GPTQ qweight: int32 [r / 8, c] -> [r, c], eight consecutive rows a word."""
    return _nibbles(packed.t()).flatten(-2).t()


def unpack_layer(fmt: Int4Format, parts: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A layer's packed tensors -> (codes int32 [out, in], scales fp32 [out, in / group], mins fp32 [out, in / group])
    with w = codes * scale + min, i.e. (q - z) * s exactly (z * s of an fp16 s and a 4-bit z is exact in fp32)."""
    scales = parts["scales"].float()  # [in / group, out]
    if fmt.method == "awq":
        codes, zeros = unpack_awq(parts["qweight"]), unpack_awq(parts["qzeros"])
    else:
        codes, zeros = unpack_along_rows(parts["qweight"]), unpack_along_columns(parts["qzeros"]) + fmt.zero_offset
    in_features, out_features = codes.shape
    if scales.shape[1] != out_features or in_features != scales.shape[0] * fmt.group_size:
        raise ValueError(f"packed weights [{in_features}, {out_features}] do not fit scales {tuple(scales.shape)} "
                         f"in groups of {fmt.group_size}")
    g_idx = parts.get("g_idx")
    if g_idx is not None and not torch.equal(g_idx.long(), torch.arange(in_features) // fmt.group_size):
        raise ValueError("g_idx is not i // group_size: an act-order (desc_act) GPTQ checkpoint, which is not served")
    zeros = zeros[:, :out_features].float()
    return codes.t().contiguous(), scales.t().contiguous(), (-zeros * scales).t().contiguous()


def _parameters_on_meta():
    """Parameters on the meta device, buffers (rotary tables) computed for real: accelerate's
    init_empty_weights, which transformers already needs for reading GGUF files."""
    from accelerate import init_empty_weights

    return init_empty_weights(include_buffers=False)


def _set_tensor(model: nn.Module, key: str, tensor: torch.Tensor, dtype: torch.dtype) -> bool:
    owner, _, name = key.rpartition(".")
    try:
        module = model.get_submodule(owner)
    except AttributeError:
        return False
    if tensor.is_floating_point():
        tensor = tensor.to(dtype)
    if name in dict(module.named_parameters(recurse=False)):
        setattr(module, name, nn.Parameter(tensor, requires_grad=False))
    elif name in dict(module.named_buffers(recurse=False)):
        setattr(module, name, tensor)  # nn.Module keeps it a buffer, persistent or not as it was
    else:
        return False
    return True


def load_int4_checkpoint(path, fmt: Int4Format, dtype: torch.dtype, device: torch.device,
                         attn_implementation: str) -> nn.Module:
    """The model of an AWQ / GPTQ folder, its quantised linears as Int4Linear with the kernel
    `device` runs (tinygemm's already on the GPU); everything else (embeddings, norms, head) on
    the CPU in `dtype`."""
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    path = Path(path)
    config = AutoConfig.from_pretrained(path)
    with _parameters_on_meta():
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attn_implementation)
    if (path / "generation_config.json").exists():  # its stop tokens, as from_pretrained would read them
        model.generation_config = GenerationConfig.from_pretrained(path)
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ValueError(f"{path} has no .safetensors files: int4 checkpoints load from safetensors only")
    with ExitStack() as stack:
        where = {key: handle for handle in (stack.enter_context(safe_open(str(f), "pt")) for f in files)
                 for key in handle.keys()}
        layers = sorted(key.removesuffix(".qweight") for key in where if key.endswith(".qweight"))
        for prefix in layers:
            parts = {part: where[f"{prefix}.{part}"].get_tensor(f"{prefix}.{part}")
                     for part in PACKED_PARTS if f"{prefix}.{part}" in where}
            _replace_linear(model, prefix, fmt, parts, device)
        packed = {f"{prefix}.{part}" for prefix in layers for part in PACKED_PARTS}
        ignored = [key for key in where if key not in packed and not _set_tensor(model, key, where[key].get_tensor(key), dtype)]
    if ignored:
        log.warning("%s: %d tensors match no parameter of the model and were ignored, e.g. %s", path, len(ignored), ignored[0])
    head, embedding = model.get_output_embeddings(), model.get_input_embeddings()
    if isinstance(head, nn.Linear) and head.weight.is_meta and config.get_text_config().tie_word_embeddings:
        head.weight = embedding.weight
    missing = [name for name, tensor in list(model.named_parameters()) + list(model.named_buffers()) if tensor.is_meta]
    if missing:
        raise ValueError(f"{path}: the checkpoint lacks {len(missing)} tensors of the model, e.g. {missing[0]}")
    log.info("%s: %d linear layers served from the %s checkpoint's int4 codes (group %d)", path, len(layers),
             fmt.method, fmt.group_size)
    return model


def _replace_linear(model: nn.Module, prefix: str, fmt: Int4Format, parts: dict[str, torch.Tensor],
                    device: torch.device) -> None:
    """The layer's int4 codes in place of its nn.Linear, packed for the kernel it runs on `device`:
    on the GPU for tinygemm (its packer runs there only), else on the CPU (the model moves later)."""
    linear = model.get_submodule(prefix)
    codes, scales, mins = unpack_layer(fmt, parts)
    if not isinstance(linear, nn.Linear) or codes.shape != (linear.out_features, linear.in_features):
        raise ValueError(f"{prefix}: int4 weights {tuple(codes.shape)} do not fit the model's {linear}")
    kernel = layer_int4_kernel(linear, fmt.group_size, device=device)
    where = device if kernel == Kernel.TINYGEMM else torch.device("cpu")
    owner, _, name = prefix.rpartition(".")
    layer = Int4Linear.from_codes(linear, codes.to(where), scales.to(where), mins.to(where), fmt.group_size, kernel,
                            bias=parts.get("bias"))
    setattr(model.get_submodule(owner), name, layer)


def checkpoint_int4_layers(model: nn.Module, quantization: str | None) -> int:
    """The Int4Linear layers a model loaded from an int4 checkpoint came with (0 for others).
    Such weights are already quantised: only int4 (or no --quantization) can serve them."""
    quant = getattr(model.config, "quantization_config", None) if hasattr(model, "config") else None
    method = (quant.get("quant_method") if isinstance(quant, dict) else getattr(quant, "quant_method", None)) or ""
    if str(method).lower() not in METHODS:
        return 0
    if quantization not in (None, "int4"):
        raise ValueError(f"quantization {quantization!r} cannot serve a {method} int4 checkpoint, whose weights are "
                         "already int4: use quantization int4 or none")
    return sum(isinstance(module, Int4Linear) for module in model.modules())
