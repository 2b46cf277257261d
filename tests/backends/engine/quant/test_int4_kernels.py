"""The int4 kernel chosen per number of rows (backends/engine/quant/int4_kernels.py): the default
table's choices, a measured table overriding it, every candidate computing the same product, and
a candidate whose optional package is missing dropped with its reason logged. On CPU the CUDA-only
calls are stood in for (tests/support/cuda_stand_ins.py: tinygemm's aten pair, the gemlite
package); the packing, the table, the dispatch and the dequantize-then-matmul path are the real code."""
from __future__ import annotations

import json
import logging
import sys

import pytest
import torch
from torch import nn

from backends.engine.quant import int4_kernels
from backends.engine.quant.int4_kernels import DEFAULT_TABLE, Int4RowKernels, RowKernel, RowTable, layer_table
from backends.engine.quant.quantize import Int4Linear, Kernel
from kernels import gemlite_int4
from kernels.quantized_linear import dequantize_int4, quantize_int4, scales_and_mins
from tests.support.cuda_stand_ins import GemLiteStandIn, Int4PackMatmul, install_tinygemm

ROWS = (1, 4, 16, 64, 256, 4096)
LLAMA_3B_UP = (8192, 3072)  # (out_features, in_features) of Llama-3.2-3B's up projection


@pytest.fixture
def tinygemm(monkeypatch) -> Int4PackMatmul:
    return install_tinygemm(monkeypatch)


@pytest.fixture
def no_gemlite(monkeypatch):
    monkeypatch.setitem(sys.modules, "gemlite", None)  # absent here even where it is installed


@pytest.fixture
def gemlite(monkeypatch) -> GemLiteStandIn:
    return GemLiteStandIn().install(monkeypatch)


def _choices(table: RowTable) -> list[str]:
    return [str(table.choose(rows)) for rows in ROWS]


def test_default_table_without_gemlite(no_gemlite, monkeypatch):
    monkeypatch.delenv(int4_kernels.TABLE_ENV, raising=False)
    table = layer_table(*LLAMA_3B_UP, 32)
    assert _choices(table) == ["tinygemm", "tinygemm", "tinygemm", "tinygemm", "dequant", "dequant"]
    assert table.packings() == {"tinygemm", "along_k"}


def test_default_table_with_gemlite(gemlite, monkeypatch):
    monkeypatch.delenv(int4_kernels.TABLE_ENV, raising=False)
    table = layer_table(*LLAMA_3B_UP, 32)
    assert table == DEFAULT_TABLE
    assert _choices(table) == ["tinygemm", "tinygemm", "gemlite", "gemlite", "dequant", "dequant"]
    assert table.describe() == "tinygemm<=4 gemlite<=64 dequant"


def test_a_measured_table_overrides_the_default(tmp_path, monkeypatch, tinygemm, no_gemlite):
    """gpu_check's int4_table step prints {"int4_row_table": ...}; pointed at by TIERGATE_INT4_TABLE,
    it decides every layer built after, and a layer runs the kernel it names for each row count."""
    measured = {"int4_row_table": [[16, "tinygemm"], [128, "triton"], [None, "dequant"]]}
    (tmp_path / "table.json").write_text(json.dumps(measured))
    monkeypatch.setenv(int4_kernels.TABLE_ENV, str(tmp_path / "table.json"))
    assert _choices(int4_kernels.active_table()) == ["tinygemm"] * 3 + ["triton"] + ["dequant"] * 2
    layer = Int4Linear.from_linear(nn.Linear(64, 32, bias=False), 32, Kernel.TINYGEMM)
    assert layer.rows.table.to_rows() == measured["int4_row_table"]
    layer(torch.randn(16, 64))
    assert tinygemm.multiplied == 1
    layer(torch.randn(17, 64))  # Triton's GEMM, in its interpreter here
    layer(torch.randn(300, 64))  # dequantized, then one matmul
    assert tinygemm.multiplied == 1


def test_tables_are_checked():
    with pytest.raises(ValueError, match="ending in None"):
        RowTable.from_rows([[16, "tinygemm"], [8, "dequant"], [None, "dequant"]])
    with pytest.raises(ValueError, match="ending in None"):
        RowTable.from_rows([[16, "tinygemm"]])
    with pytest.raises(ValueError):
        RowTable.from_rows([[None, "marlin"]])


def _layer_inputs(rows: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(96, 128, generator=gen) * 0.1
    codes, scales_and_zeros = quantize_int4(weight, 32)
    x = torch.randn(rows, 128, generator=gen).to(torch.bfloat16)
    expected = x.float() @ dequantize_int4(codes, scales_and_zeros, 32).t()
    return codes, scales_and_zeros, x, expected


@pytest.mark.parametrize("rows", [1, 5, 20])
def test_every_candidate_computes_the_reference_product(tinygemm, gemlite, rows):
    """One layer holding every packing; each kernel against x times the dequantized weights. A wrong
    nibble order, zero point or scale layout in any packing changes its product."""
    codes, scales_and_zeros, x, expected = _layer_inputs(rows, rows)
    table = RowTable(((1, RowKernel.TINYGEMM), (2, RowKernel.GEMLITE), (3, RowKernel.TRITON), (None, RowKernel.DEQUANT)))
    layer = Int4RowKernels(codes, *scales_and_mins(scales_and_zeros), 32, table)
    assert layer.table.packings() == {"tinygemm", "gemlite", "along_k"} and gemlite.packed == 1
    for kernel in RowKernel:
        got = layer.run(kernel, x)
        assert got.dtype == torch.bfloat16 and got.shape == (rows, 96), kernel
        torch.testing.assert_close(got.float(), expected, atol=2e-2 * expected.abs().max().item(), rtol=0,
                                   msg=lambda m, kernel=kernel: f"{kernel}: {m}")
    assert (tinygemm.multiplied, gemlite.multiplied) == (1, 2)  # GemLite: its probe at load, then the product


def test_a_gemlite_that_computes_other_weights_is_dropped_at_load(tinygemm, gemlite, monkeypatch, caplog):
    """A package whose zero-point convention differs from ours fails the load-time probe: the layer
    serves its rows on the fallback instead of giving wrong answers."""
    monkeypatch.setattr(gemlite_int4, "gemlite_zero_points", lambda scales, mins: mins / scales)
    codes, scales_and_zeros, x, expected = _layer_inputs(8)
    with caplog.at_level(logging.INFO, logger="tiergate.int4_kernels"):
        layer = Int4RowKernels(codes, *scales_and_mins(scales_and_zeros), 32, DEFAULT_TABLE)
    assert layer.gemlite == [] and layer.table.choose(8) == RowKernel.TINYGEMM
    assert any("answers differ" in r.getMessage() for r in caplog.records)
    torch.testing.assert_close(layer(x).float(), expected, atol=2e-2 * expected.abs().max().item(), rtol=0)


def test_a_layer_keeps_only_the_packings_its_table_reads(tinygemm, no_gemlite):
    codes, scales_and_zeros, x, _ = _layer_inputs(4)
    only = Int4RowKernels(codes, *scales_and_mins(scales_and_zeros), 32, RowTable.only("tinygemm"))
    assert only.along_k is None and only.tinygemm is not None and only.gemlite == []
    dequant = Int4RowKernels(codes, *scales_and_mins(scales_and_zeros), 32, RowTable.only("dequant"))
    assert dequant.tinygemm is None and tinygemm.converted == 1


def test_a_missing_package_removes_its_candidate_with_the_reason_logged(caplog, monkeypatch):
    """GemLite absent: its rows go to tinygemm, and the reason is logged once, not once per layer."""
    monkeypatch.setitem(sys.modules, "gemlite", None)  # importlib then finds no such package, installed or not
    monkeypatch.setattr(int4_kernels, "_reported", set())
    with caplog.at_level(logging.INFO, logger="tiergate.int4_kernels"):
        tables = [layer_table(*LLAMA_3B_UP, 32, table=DEFAULT_TABLE) for _ in range(3)]
    assert tables[0] == RowTable(((64, RowKernel.TINYGEMM), (None, RowKernel.DEQUANT)))
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["int4 kernel gemlite is not a candidate (the optional package 'gemlite' is not installed): "
                        "its rows go to tinygemm"]


def test_a_shape_tinygemm_cannot_take_goes_to_triton(no_gemlite):
    table = layer_table(44, 128, 32, table=DEFAULT_TABLE)  # 44: not a multiple of 8
    assert _choices(table) == ["triton"] * 4 + ["dequant"] * 2


def test_each_graph_bucket_runs_the_kernel_of_its_rows(tinygemm, no_gemlite, monkeypatch):
    """A CUDA-graph capture calls the layer once at its bucket's row count: the table is read at
    call time, so a bucket of 4 rows holds tinygemm and one of 256 the dequantized matmul."""
    monkeypatch.delenv(int4_kernels.TABLE_ENV, raising=False)
    layer = Int4Linear.from_linear(nn.Linear(128, 64, bias=True), 32, Kernel.TINYGEMM)
    ran = []
    original = layer.rows.run
    monkeypatch.setattr(layer.rows, "run", lambda kernel, x: ran.append(str(kernel)) or original(kernel, x))
    for bucket in (1, 4, 256):
        layer(torch.zeros(1, bucket, 128, dtype=torch.bfloat16))
    assert ran == ["tinygemm", "tinygemm", "dequant"]


def test_a_second_packing_only_while_the_gpu_keeps_room(no_gemlite, monkeypatch):
    """Past MIN_FREE_SHARE of the GPU, layers keep tinygemm's packing alone (a 70B's second copy
    would not fit); below it, both. The reason is logged once."""
    monkeypatch.setattr(int4_kernels, "_reported", set())
    cuda, gib = torch.device("cuda"), 2**30
    monkeypatch.setattr(int4_kernels, "gpu_memory", lambda device: (free, 80 * gib) if device.type == "cuda" else None)
    free = 60 * gib
    assert layer_table(*LLAMA_3B_UP, 32, table=DEFAULT_TABLE, device=cuda).packings() == {"tinygemm", "along_k"}
    free = 32 * gib
    assert layer_table(*LLAMA_3B_UP, 32, table=DEFAULT_TABLE, device=cuda) == RowTable.only("tinygemm")
    assert layer_table(*LLAMA_3B_UP, 32, table=DEFAULT_TABLE) == RowTable(
        ((64, RowKernel.TINYGEMM), (None, RowKernel.DEQUANT)))  # CPU tensors: no GPU to crowd
