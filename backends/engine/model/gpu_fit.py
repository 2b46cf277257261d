"""Whether a checkpoint's weights fit the GPU, asked before loading them.

Without this check a model too large for the GPU dies inside the load with torch's raw
OutOfMemoryError. The weights' size comes from the safetensors headers (shapes only, no data
read) times the dtype they load in; the engine quantizes after loading them in that dtype, so
the load needs the dense size even where int4 or int8 is configured (the message gives both
figures). The free memory comes from `mem_get_info` (torch.cuda.mem_get_info unless a test
passes a stand-in), counted as the KV pool's sizing counts it (engine/model/device.py).
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ..device_defaults import defaults_for
from .device import DoesNotFit
from .model_runner import load_model

GIB = 1 << 30
MemGetInfo = Callable[[torch.device], tuple[int, int]]  # device -> (free, total) bytes
# per weight: int4 codes plus a 2-byte (scale, zero) pair per group; int8 codes plus 4 bytes per row
QUANTIZED_BYTES = {"int4": lambda n, rows, group: n // 2 + n // group * 4, "int8": lambda n, rows, group: n + 4 * rows}


def safetensors_headers(folder: Path) -> dict[str, dict]:
    """Tensor name -> its header entry (dtype, shape, data_offsets) from the folder's weight files."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = [p.name for p in sorted(folder.glob("model*.safetensors"))]
    entries: dict[str, dict] = {}
    for name in files:
        with open(folder / name, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(length))
        entries.update({k: v for k, v in header.items() if k != "__metadata__"})
    return entries


def safetensors_shapes(folder: Path) -> dict[str, list[int]]:
    return {name: entry["shape"] for name, entry in safetensors_headers(folder).items()}


def packed_bytes(folder: Path) -> dict[str, int]:
    """Integer tensors (an AWQ/GPTQ folder's packed codes and zeros) load as stored: name -> bytes."""
    return {name: entry["data_offsets"][1] - entry["data_offsets"][0]
            for name, entry in safetensors_headers(folder).items() if entry["dtype"][0] in "IU"}


@dataclass(frozen=True)
class WeightNeed:
    load_bytes: int  # on the GPU once loaded in `dtype`, before any quantization
    served_bytes: int  # after the configured quantization (== load_bytes without one)
    parameters: int
    dtype: torch.dtype
    quantization: str | None

    def describe(self) -> str:
        text = f"model weights need {self.load_bytes / GIB:.1f} GiB ({self.parameters / 1e9:.2f}B parameters in " \
               f"{str(self.dtype).removeprefix('torch.')}"
        if self.quantization:
            text += f", loaded so before {self.quantization} quantization brings them to " \
                    f"{self.served_bytes / GIB:.1f} GiB"
        return text + ")"


def weight_need(shapes: dict[str, list[int]], dtype: torch.dtype, quantization: str | None = None,
                group_size: int = 32, packed: dict[str, int] | None = None) -> WeightNeed:
    """Bytes of the weights in `dtype`, and after quantization: every 2-d weight inside the decoder
    layers, plus the LM head (or the tied embedding it shares) as int8 (engine/quant/quantize.py).
    `packed` (name -> bytes): an int4 folder's integer tensors, which load as they are stored."""
    element = torch.finfo(dtype).bits // 8
    packed = packed or {}
    numel = {name: _prod(shape) for name, shape in shapes.items()}
    load = sum(packed.get(name, n * element) for name, n in numel.items())
    served = load
    if packed:
        quantization = None  # the folder is int4 already: nothing is quantized after the load
    if quantization:
        head = "lm_head.weight" if "lm_head.weight" in shapes else \
            next((n for n in shapes if n.endswith("embed_tokens.weight")), None)
        for name, shape in shapes.items():
            if len(shape) != 2 or not (".layers." in name or name == head):
                continue
            method = quantization if name != head else "int8"
            served += QUANTIZED_BYTES[method](numel[name], shape[0], group_size) - numel[name] * element
    return WeightNeed(load, served, sum(numel.values()), dtype, quantization)


def _prod(shape: list[int]) -> int:
    out = 1
    for size in shape:
        out *= size
    return out


def usable_bytes(utilization: float, device: torch.device, mem_get_info: MemGetInfo) -> tuple[int, int, int]:
    """(usable, free, total): `utilization` of the GPU less what is already in use."""
    free, total = mem_get_info(device)
    return int(total * utilization) - (total - free), free, total


def check_weights_fit(need: WeightNeed, utilization: float, device: torch.device,
                      mem_get_info: MemGetInfo | None = None) -> None:
    """Raises DoesNotFit naming both figures when the weights alone exceed the usable memory."""
    usable, free, total = usable_bytes(utilization, device, mem_get_info or torch.cuda.mem_get_info)
    if need.load_bytes > usable:
        raise DoesNotFit(f"{need.describe()} but the GPU has {max(usable, 0) / GIB:.1f} GiB free at "
                         f"gpu_memory_utilization={utilization} ({free / GIB:.1f} of {total / GIB:.1f} GiB free)")


def load_fitting(path: Path, dtype: torch.dtype, device: torch.device, quantization: str | None = None,
                 group_size: int = 32, utilization: float | None = 0.9, mem_get_info: MemGetInfo | None = None):
    """load_model, checked first on CUDA; an OutOfMemoryError during the load (the estimate missed
    something) becomes the same one-line DoesNotFit."""
    need = None
    if defaults_for(device.type).device_memory and utilization is not None:
        shapes = safetensors_shapes(path)
        if shapes:
            need = weight_need(shapes, dtype, quantization, group_size, packed_bytes(path))
            check_weights_fit(need, utilization, device, mem_get_info)
    try:
        return load_model(path, dtype, device)
    except torch.OutOfMemoryError as error:
        free, total = (mem_get_info or torch.cuda.mem_get_info)(device)
        what = need.describe() if need else "the model's weights"
        raise DoesNotFit(f"{what}: the GPU ran out of memory loading them ({free / GIB:.1f} of "
                         f"{total / GIB:.1f} GiB free after the failed load): {str(error).splitlines()[0]}") from None
