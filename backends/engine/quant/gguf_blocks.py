"""The Q4_1 weight blocks of a bundled GGUF, kept beside its prepared safetensors folder.

The prepared folder holds the GGUF's weights dequantised to fp32. Quantising those again
for the int4 tier would round a second time; instead `prepare` copies the GGUF's own Q4_1
blocks into `q4_1_blocks.safetensors` (one uint8 tensor of raw blocks per linear layer,
named like the HF module), and the int4 tier maps them onto the int4 kernel unchanged
(backends/engine/quant/quantize.py). Each layer is checked against the fp32 folder while it is
extracted: its blocks must dequantise to exactly the fp32 weights there, so a wrong name
or row order fails the extraction rather than the answers.
"""
from __future__ import annotations

from pathlib import Path

import torch

from kernels.quantized_linear import dequantize_q4_1

Q4_1_FILE = "q4_1_blocks.safetensors"
# GGUF tensor name (blk.N.<key>.weight) -> HF module inside model.layers.N, Llama layout
_LLAMA_MODULES = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def _unpermute_rows(rows: torch.Tensor, heads: int) -> torch.Tensor:
    """llama.cpp's converter interleaves the rotary halves of each q/k head's rows; undo it
    the way transformers does when it loads the GGUF. Whole rows move, so blocks stay intact."""
    half = rows.shape[0] // heads // 2
    return rows.reshape(heads, half, 2, *rows.shape[1:]).transpose(1, 2).reshape(rows.shape).contiguous()


def _hf_module(gguf_name: str) -> str | None:
    parts = gguf_name.split(".")
    if len(parts) != 4 or parts[0] != "blk" or parts[3] != "weight" or parts[2] not in _LLAMA_MODULES:
        return None
    return f"model.layers.{parts[1]}.{_LLAMA_MODULES[parts[2]]}"


def extract_q4_1(gguf_path: Path, folder: Path) -> int:
    """Write `folder / Q4_1_FILE` from the GGUF's Q4_1 tensors; returns how many layers."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFReader
    from safetensors import safe_open
    from safetensors.torch import save_file

    reader = GGUFReader(gguf_path)
    arch = reader.fields["general.architecture"].contents()
    if arch != "llama":
        raise ValueError(f"Q4_1 extraction knows the llama tensor layout only, not {arch!r}")
    heads = {"attn_q": reader.fields["llama.attention.head_count"].contents(),
             "attn_k": reader.fields["llama.attention.head_count_kv"].contents()}
    blocks: dict[str, torch.Tensor] = {}
    with safe_open(str(folder / "model.safetensors"), "pt") as fp32:
        for tensor in reader.tensors:
            module = _hf_module(tensor.name)
            if tensor.tensor_type != GGMLQuantizationType.Q4_1 or module is None:
                continue  # other types (e.g. the Q8_0 embedding) stay as the fp32 folder has them
            raw = torch.from_numpy(np.array(tensor.data, dtype=np.uint8))
            key = tensor.name.split(".")[2]
            if key in heads:
                raw = _unpermute_rows(raw, heads[key])
            if not torch.equal(dequantize_q4_1(raw), fp32.get_tensor(module + ".weight")):
                raise RuntimeError(f"{tensor.name}: Q4_1 blocks do not dequantise to {module}.weight")
            blocks[module] = raw
    partial = folder / (Q4_1_FILE + ".partial")
    save_file(blocks, str(partial))
    partial.rename(folder / Q4_1_FILE)  # atomic: a half-written file is never picked up
    return len(blocks)


def load_q4_1(folder: str | Path | None) -> dict[str, torch.Tensor]:
    """The raw Q4_1 blocks by HF module name, or {} when the folder has none."""
    if not folder or not (Path(folder) / Q4_1_FILE).exists():
        return {}
    from safetensors.torch import load_file

    return load_file(str(Path(folder) / Q4_1_FILE))
