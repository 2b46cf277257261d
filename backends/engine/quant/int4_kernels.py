"""Which int4 kernel a CUDA int4 layer runs for x's number of rows: the candidates and the one
table of thresholds (rows -> kernel), read at call time, so each CUDA-graph batch bucket captures
the kernel its own row count chooses.

Candidates:
- `tinygemm`: aten's `_weight_int4pack_mm` (kernels/tinygemm_int4.py), made for one or a few rows;
- `gemlite`: GemLite's Triton kernels (kernels/gemlite_int4.py), only where that package imports;
- `triton`: our Triton GEMV / GEMM (kernels/triton_quantized_matmul.py);
- `dequant`: the weights dequantized to bf16, then one tensor-core matmul (kernels/int4_dequant.py),
  for prompt chunks.

The default table is a first guess from the measurements in docs/quantization.md ("int4 kernels
per row count"); `python -m benchmarks.gpu_check --only int4_table` measures every
candidate and prints a table in the form `load_table` reads, so a GPU run can replace it: set
TIERGATE_INT4_TABLE to that file, or paste its rows into DEFAULT_TABLE. A kernel a layer cannot
run (GemLite absent, a shape it does not take) gives its rows to its FALLBACK, logged once.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import torch
from torch import nn

from kernels import gemlite_int4, tinygemm_int4
from kernels.int4_dequant import dequant_int4_linear, dequantize_along_k, pack_int4_along_k
from kernels.quantized_linear import scales_and_zeros_of

log = logging.getLogger("tiergate.int4_kernels")
TABLE_ENV = "TIERGATE_INT4_TABLE"


class RowKernel(StrEnum):
    TINYGEMM = "tinygemm"
    GEMLITE = "gemlite"
    TRITON = "triton"
    DEQUANT = "dequant"


# which packed form of the codes each kernel reads: a layer keeps one copy per form its table uses
PACKING = {RowKernel.TINYGEMM: "tinygemm", RowKernel.GEMLITE: "gemlite", RowKernel.TRITON: "along_k",
           RowKernel.DEQUANT: "along_k"}
# where a kernel's rows go when a layer cannot run it; dequant and triton run every int4 layer on CUDA
FALLBACK = {RowKernel.GEMLITE: RowKernel.TINYGEMM, RowKernel.TINYGEMM: RowKernel.TRITON}


@dataclass(frozen=True)
class RowTable:
    """(most rows, kernel) steps in increasing order; the last step's bound is None (any rows)."""
    steps: tuple[tuple[int | None, RowKernel], ...]

    def __post_init__(self):
        bounds = [rows for rows, _ in self.steps]
        if not self.steps or bounds[-1] is not None or None in bounds[:-1] or bounds[:-1] != sorted(set(bounds[:-1])):
            raise ValueError(f"an int4 row table is increasing row bounds ending in None (any rows), got {bounds}")

    @classmethod
    def only(cls, kernel: RowKernel | str) -> "RowTable":
        return cls(((None, RowKernel(kernel)),))

    @classmethod
    def from_rows(cls, rows: list) -> "RowTable":
        """[[most rows or null, kernel name], ...], as `to_rows` and gpu_check print it."""
        return cls(tuple((None if bound is None else int(bound), RowKernel(name)) for bound, name in rows))

    def to_rows(self) -> list:
        return [[bound, str(kernel)] for bound, kernel in self.steps]

    def choose(self, rows: int) -> RowKernel:
        return next(kernel for bound, kernel in self.steps if bound is None or rows <= bound)

    def kernels(self) -> set[RowKernel]:
        return {kernel for _, kernel in self.steps}

    def packings(self) -> set[str]:
        return {PACKING[kernel] for kernel in self.kernels()}

    def describe(self) -> str:
        """e.g. "tinygemm<=64 dequant" (gpu_check names each layer's kernels so)."""
        return " ".join(str(k) if bound is None else f"{k}<={bound}" for bound, k in self.steps)

    def replaced(self, kernel: RowKernel, by: RowKernel) -> "RowTable":
        """This table with `kernel`'s rows given to `by`, neighbouring steps of one kernel merged."""
        steps: list[tuple[int | None, RowKernel]] = []
        for bound, chosen in self.steps:
            chosen = by if chosen == kernel else chosen
            if steps and steps[-1][1] == chosen:
                steps.pop()
            steps.append((bound, chosen))
        return RowTable(tuple(steps))


# tinygemm for a row or a few, GemLite (where present) for decode batches, dequantize-then-bf16-
# matmul for prompt chunks; the bounds' measurements: docs/quantization.md
DEFAULT_TABLE = RowTable(((4, RowKernel.TINYGEMM), (64, RowKernel.GEMLITE), (None, RowKernel.DEQUANT)))


def load_table(path: str | Path) -> RowTable:
    """A table from a JSON file: {"int4_row_table": [[rows, kernel], ...]} (gpu_check's int4_table
    step prints that object) or the bare list."""
    data = json.loads(Path(path).read_text())
    return RowTable.from_rows(data["int4_row_table"] if isinstance(data, dict) else data)


def active_table() -> RowTable:
    """TIERGATE_INT4_TABLE's table where it is set, else DEFAULT_TABLE."""
    path = os.environ.get(TABLE_ENV)
    return load_table(path) if path else DEFAULT_TABLE


_reported: set[str] = set()


def _drop(table: RowTable, kernel: RowKernel, why: str) -> RowTable:
    by = FALLBACK.get(kernel, RowKernel.DEQUANT)
    message = f"int4 kernel {kernel} is not a candidate ({why}): its rows go to {by}"
    if message not in _reported:  # once per reason, not once per layer
        _reported.add(message)
        log.info(message)
    return table.replaced(kernel, by)


def missing(kernel: RowKernel, out_features: int, in_features: int, group_size: int, dtype: torch.dtype) -> str | None:
    """Why a layer of this shape cannot run `kernel`, or None where it can."""
    if kernel == RowKernel.TINYGEMM and not tinygemm_int4.takes(out_features, in_features, group_size, dtype):
        return f"tinygemm does not take [{out_features}, {in_features}] in groups of {group_size} with {dtype}"
    if kernel == RowKernel.GEMLITE:
        found, why = gemlite_int4.available()
        if not found:
            return why
        if not gemlite_int4.takes(out_features, in_features, group_size):
            return f"GemLite does not take [{out_features}, {in_features}] in groups of {group_size}"
    return None


# a layer keeps a second packing of its codes only while this share of the GPU stays free after it
# (the KV pool and activations come later): a 70B's second copy would not fit beside its first
MIN_FREE_SHARE = 0.4


def gpu_memory(device: torch.device) -> tuple[int, int] | None:
    """(free, total) bytes of a CUDA device; None elsewhere."""
    return torch.cuda.mem_get_info(device) if device.type == "cuda" else None


def _one_packing(table: RowTable, out_features: int, in_features: int, device: torch.device) -> RowTable:
    """`table`, or its one-row kernel at every row count where a second packing would not leave
    MIN_FREE_SHARE of the GPU free."""
    memory = gpu_memory(device)
    if len(table.packings()) < 2 or memory is None:
        return table
    free, total = memory
    if free - out_features * in_features // 2 >= MIN_FREE_SHARE * total:
        return table
    single = RowTable.only(table.choose(1))
    message = f"int4 layers keep one packing from here ({free / 2**30:.1f} of {total / 2**30:.1f} GiB free): {single.describe()}"
    if message not in _reported:
        _reported.add(message)
        log.info(message)
    return single


def layer_table(out_features: int, in_features: int, group_size: int, dtype: torch.dtype = torch.bfloat16,
                table: RowTable | None = None, device: torch.device | str = "cpu") -> RowTable:
    """`table` (default: active_table()) with each kernel this layer cannot run replaced by its
    fallback, on one packing where a second would crowd the GPU on `device` (MIN_FREE_SHARE)."""
    table = table or active_table()
    for kernel in (RowKernel.GEMLITE, RowKernel.TINYGEMM):  # gemlite first: its fallback is tinygemm
        why = kernel in table.kernels() and missing(kernel, out_features, in_features, group_size, dtype)
        if why:
            table = _drop(table, kernel, why)
    return _one_packing(table, out_features, in_features, torch.device(device))


def _gemlite_layer(codes: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor, group_size: int):
    """(GemLite's layer, None), or (None, why) where it fails to pack or to compute our weights:
    an optional package of another version must cost its speed, never an answer."""
    try:
        layer = gemlite_int4.pack(codes, scales, mins, group_size)
        if gemlite_int4.agrees(layer, codes, scales, mins, group_size):
            return layer, None
        return None, "its answers differ from the dequantized weights on a probe"
    except Exception as error:  # an API this module does not know: serve on the fallback
        return None, f"GemLite failed to pack a layer: {error!r}"[:300]


def _triton_linear():
    """Imported on first use: only a table that names triton loads it."""
    from kernels.triton_quantized_matmul import triton_int4_linear

    return triton_int4_linear


class Int4RowKernels(nn.Module):
    """The CUDA kernels of one int4 layer [n, k] and its row table: forward(x) runs the kernel
    the table chooses for x's row count. It keeps one packing of the codes per form its table's
    kernels read (tinygemm's tiles, the along-k bytes of triton and dequant, GemLite's own):
    tinygemm's tile layout is opaque, so no other kernel can read it, and each extra form costs
    half a byte per weight. No bias: the layer adds it."""

    def __init__(self, codes: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor, group_size: int,
                 table: RowTable):
        super().__init__()
        # a list: GemLite's module stays out of this one's children (it is not ours to move or save)
        self.gemlite = []
        if RowKernel.GEMLITE in table.kernels():
            layer, why = _gemlite_layer(codes, scales, mins, group_size)
            if layer is None:
                table = _drop(table, RowKernel.GEMLITE, why)
            else:
                self.gemlite.append(layer)
        self.table, self.group_size, self.out_features = table, group_size, codes.shape[0]
        packings = table.packings()
        self.register_buffer("scales_and_zeros", scales_and_zeros_of(scales, mins))
        self.register_buffer("tinygemm", tinygemm_int4.pack(codes) if "tinygemm" in packings else None)
        self.register_buffer("along_k", pack_int4_along_k(codes) if "along_k" in packings else None)

    def dequantized(self) -> torch.Tensor:
        """The fp32 weights [n, k] every kernel multiplies by (from the along-k packing, where held)."""
        return dequantize_along_k(self.along_k, self.scales_and_zeros, self.group_size, torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.run(self.table.choose(x.numel() // x.shape[-1]), x)

    def run(self, kernel: RowKernel, x: torch.Tensor) -> torch.Tensor:
        """x through one of this layer's kernels (gpu_check's int4_table step times each)."""
        if kernel == RowKernel.TINYGEMM:
            return tinygemm_int4.tinygemm_int4_linear(x, self.tinygemm, self.scales_and_zeros, self.group_size,
                                                      self.out_features)
        if kernel == RowKernel.DEQUANT:
            return dequant_int4_linear(x, self.along_k, self.scales_and_zeros, self.group_size)
        if kernel == RowKernel.TRITON:
            return _triton_linear()(x, self.along_k, self.scales_and_zeros, self.group_size)
        return gemlite_int4.gemlite_int4_linear(x, self.gemlite[0])
