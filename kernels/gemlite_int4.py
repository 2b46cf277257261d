"""GemLite's int4 x bf16 Triton kernels (PyPI `gemlite`, optional): an int4 candidate for decode
batches of a few to some dozens of rows, where tinygemm falls behind. Absent package, absent
candidate: nothing here is imported until `available()` says it can be.

GemLite computes w = (q - zero) * scale per group, with its own packing of the codes; ours is
w = (q - 8) * scale + zero', so its zero point is 8 - zero' / scale (a float, held in the
activations' dtype). The layer hands over its codes once, at load, and keeps GemLite's packed
module beside its own packing.
"""
from __future__ import annotations

import importlib
import importlib.util

import torch

PACKAGE = "gemlite"
DTYPE = torch.bfloat16


def available() -> tuple[bool, str]:
    """(importable, why not): the package must be installed and import (it needs triton)."""
    if importlib.util.find_spec(PACKAGE) is None:
        return False, f"the optional package {PACKAGE!r} is not installed"
    try:
        importlib.import_module(f"{PACKAGE}.core")
    except Exception as error:  # a broken install: say why, serve without it
        return False, f"{PACKAGE} does not import: {error!r}"[:300]
    return True, ""


def takes(out_features: int, in_features: int, group_size: int) -> bool:
    """GemLite's groups are multiples of 32 (at least 16 rows of k per tile)."""
    return group_size % 32 == 0 and in_features % group_size == 0 and out_features % 32 == 0


def gemlite_zero_points(scales: torch.Tensor, mins: torch.Tensor) -> torch.Tensor:
    """Our w = q * scale + min as GemLite's (q - zero) * scale: zero = -min / scale."""
    return -mins / scales


def pack(codes: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor, group_size: int):
    """codes [n, k] 0..15, scales and mins fp32 [n, k / group] -> GemLite's layer (an nn.Module)."""
    core = importlib.import_module(f"{PACKAGE}.core")
    layer_type = getattr(core, "GemLiteLinear", None) or core.GemLiteLinearTriton
    n, k = codes.shape
    layer = layer_type(4, group_size=group_size, in_features=k, out_features=n,
                       input_dtype=core.DType.BF16, output_dtype=core.DType.BF16)
    zeros = gemlite_zero_points(scales, mins)
    layer.pack(codes.to(torch.uint8), scales.to(DTYPE).reshape(-1, 1), zeros.to(DTYPE).reshape(-1, 1), None)
    return layer


def gemlite_int4_linear(x: torch.Tensor, layer) -> torch.Tensor:
    """x [..., k] -> [..., n] in x's dtype, no bias."""
    flat = x.reshape(-1, x.shape[-1]).to(DTYPE).contiguous()
    return layer(flat).to(x.dtype).reshape(*x.shape[:-1], -1)


def agrees(layer, codes: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor, group_size: int) -> bool:
    """Whether GemLite's packed layer computes our weights: a few one-hot rows read columns of
    w = q * scale + min back, so a package whose conventions differ from what this module was
    written against is caught at load, not in a client's answer."""
    n, k = codes.shape
    columns = torch.linspace(0, k - 1, steps=min(4, k), device=codes.device).long()
    x = torch.zeros(len(columns), k, dtype=DTYPE, device=codes.device)
    x[torch.arange(len(columns), device=codes.device), columns] = 1
    groups = columns // group_size
    want = (codes[:, columns].float() * scales[:, groups] + mins[:, groups]).t()  # [columns, n]
    got = gemlite_int4_linear(x, layer).float()
    return bool(torch.allclose(got, want, rtol=1e-2, atol=1e-2 * float(want.abs().max()) + 1e-6))
