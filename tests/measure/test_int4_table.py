"""gpu_check's int4_table step (measure/int4_table.py) on CPU: every candidate runs on one layer's
projections at every row count (the CUDA calls stood in for: tests/support/cuda_stand_ins.py),
each agrees with the dequantized reference, and the table it prints is the one the costs choose
and the one the chooser loads."""
from __future__ import annotations

import json
import sys

import pytest
import torch

from backends.engine.quant import int4_kernels
from kernels import tinygemm_int4
from measure.int4_table import int4_kernel_table, projection_shapes
from tests.support.cuda_stand_ins import GemLiteStandIn, Int4PackMatmul

ROWS = (1, 4, 16, 64, 256, 4096)
SMALL = {"small": [(64, 128), (32, 64)], "wide": [(96, 256)]}


def _costs(kernel: str, rows: int) -> float:
    """Made-up seconds per call, shaped as the issue's H100 run suggests, to check the choosing."""
    return {"bf16": 1.0, "tinygemm": 0.5 if rows <= 4 else rows / 16, "gemlite": 0.8 if rows <= 64 else 2.0,
            "dequant": 3.0 if rows < 256 else 1.1, "triton": 10.0}[kernel]


class Timer:
    def __init__(self):
        self.calls: list[tuple[str, int]] = []

    def __call__(self, kernel, rows, call):
        call()  # runs for real, under the stand-ins
        self.calls.append((kernel, rows))
        return _costs(kernel, rows)


@pytest.fixture
def stand_ins(monkeypatch):
    tinygemm = Int4PackMatmul()
    monkeypatch.setattr(tinygemm_int4, "OPS", tinygemm.ops())
    return tinygemm, GemLiteStandIn().install(monkeypatch)


def test_every_candidate_is_timed_and_the_cheapest_makes_the_table(stand_ins, tmp_path, monkeypatch):
    tinygemm, gemlite = stand_ins
    timer = Timer()
    result = int4_kernel_table(SMALL, timer, torch.device("cpu"), ROWS[:5] + (300,))
    assert result["candidates"] == ["tinygemm", "gemlite", "triton", "dequant"] and result["not_candidates"] == {}
    assert len(timer.calls) == 2 * 6 * 5  # shapes x rows x (bf16 and four kernels)
    # one call per projection (three in all) at each row count, and one per shape for the agreement;
    # GemLite also answers each packed layer's probe at load (int4_kernels._gemlite_layer)
    assert tinygemm.multiplied == 3 * 6 + 2 and gemlite.multiplied == tinygemm.multiplied + gemlite.packed
    assert result["int4_row_table"] == [[4, "tinygemm"], [64, "gemlite"], [None, "dequant"]]
    small = result["shapes"]["small"]
    assert small["x_bf16"]["tinygemm"]["1"] == 2.0 and small["bf16_us"]["1"] == 1e6
    assert all(error < 2e-2 for error in small["max_relative_error"].values()), small["max_relative_error"]
    # the step writes this object; the chooser loads it
    (tmp_path / "table.json").write_text(json.dumps(result))
    monkeypatch.setenv(int4_kernels.TABLE_ENV, str(tmp_path / "table.json"))
    assert int4_kernels.active_table().describe() == "tinygemm<=4 gemlite<=64 dequant"


def test_without_gemlite_it_is_no_candidate_and_says_why(stand_ins, monkeypatch):
    monkeypatch.setitem(sys.modules, "gemlite", None)
    result = int4_kernel_table({"small": SMALL["small"]}, Timer(), torch.device("cpu"), (1, 64, 256))
    assert "gemlite" not in result["candidates"] and "not installed" in result["not_candidates"]["gemlite"]
    assert result["int4_row_table"] == [[1, "tinygemm"], [None, "dequant"]]


def test_llama_projection_shapes():
    # Llama-3.2-3B: hidden 3072, 24 heads of 128, 8 kv heads, intermediate 8192
    assert projection_shapes(3072, 8192, 24, 8, 128) == [(3072, 3072), (1024, 3072), (1024, 3072), (3072, 3072),
                                                         (8192, 3072), (8192, 3072), (3072, 8192)]
