"""Sibling int4 projections (q/k/v, gate/up) fused for compiled decode steps
(engine/quant/quantize.py fuse_sibling_projections): one kernel call per group inside the graph,
the same numbers as the separate layers, and no second copy of the codes."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch._inductor.utils import run_and_get_code

from backends.engine.quant.quantize import Int4Linear, fuse_sibling_projections


class Attention(nn.Module):
    def __init__(self, hidden: int, kv: int, bias: bool, kernel: str | None = None):
        super().__init__()
        self.q_proj = Int4Linear.from_linear(nn.Linear(hidden, hidden, bias=bias), 32, kernel)
        self.k_proj = Int4Linear.from_linear(nn.Linear(hidden, kv, bias=bias), 32, kernel)
        self.v_proj = Int4Linear.from_linear(nn.Linear(hidden, kv, bias=bias), 32, kernel)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)


@pytest.mark.slow  # torch.compile
def test_compiled_siblings_make_one_kernel_call_with_the_same_outputs():
    torch.manual_seed(0)
    model = Attention(128, 64, bias=True)
    x = torch.randn(3, 128)
    with torch.inference_mode():
        separate = [layer.matmul(x) + layer.bias for layer in (model.q_proj, model.k_proj, model.v_proj)]
        assert fuse_sibling_projections(model) == 1
        eager = model(x)
        # CompiledDecode freezes the weights; the freezing pass is where the calls merge
        with torch._inductor.config.patch(freezing=True):
            compiled, code = run_and_get_code(torch.compile(model, fullgraph=True), x)
    # our kernel, or aten's or inductor's wrapper of it (int4mm_packed_weight_cpu) without a compiler
    calls = sum(1 for line in "\n".join(code).splitlines() if "= torch.ops." in line and "int4" in line)
    assert calls == 1, code
    for ours, theirs in zip(eager, separate):
        assert torch.equal(ours, theirs)  # eager calls keep one matmul per layer, bit for bit
    for ours, theirs in zip(compiled, separate):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_fused_layers_view_one_stacked_copy_of_the_codes():
    model = Attention(128, 64, bias=False)
    fuse_sibling_projections(model)
    group = model.q_proj.fused[0]
    assert all(layer.fused[0] is group for layer in (model.k_proj, model.v_proj))
    assert model.v_proj.packed.untyped_storage().data_ptr() == group.packed.untyped_storage().data_ptr()
    assert [layer.fused[1:] for layer in (model.q_proj, model.k_proj, model.v_proj)] == [(0, 128), (128, 192), (192, 256)]


def test_layers_of_different_input_width_are_not_fused():
    model = nn.Module()
    model.gate_proj = Int4Linear.from_linear(nn.Linear(64, 32), 32)
    model.up_proj = Int4Linear.from_linear(nn.Linear(32, 32), 32)
    assert fuse_sibling_projections(model) == 0 and model.gate_proj.fused is None


def test_aten_layers_that_fill_part_of_a_packing_block_are_not_fused():
    """AVX-512 packs 64 rows per block and a 32-row layer differently: the stacked codes
    would give k and v wrong columns on such a CPU (seen: errors of ~2 against the layers).
    Our tiles hold 4 rows each, so such layers fuse, with the same numbers."""
    model = Attention(128, 32, bias=False, kernel="aten")
    assert fuse_sibling_projections(model) == 0
    assert all(layer.fused is None for layer in (model.q_proj, model.k_proj, model.v_proj))
    ours, x = Attention(128, 32, bias=False), torch.randn(2, 128)
    with torch.inference_mode():
        separate = [layer.matmul(x) for layer in (ours.q_proj, ours.k_proj, ours.v_proj)]
        assert fuse_sibling_projections(ours) == 1
        group = ours.q_proj.fused[0]
        stacked = ours.q_proj.matmul(x, group.packed)  # what a compiled step computes
    assert torch.equal(torch.cat(separate, dim=-1), stacked)
