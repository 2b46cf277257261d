"""Sibling int4 projections (q/k/v, gate/up) fused for compiled decode steps
(engine/quantize.py fuse_sibling_projections): one kernel call per group inside the graph,
the same numbers as the separate layers, and no second copy of the codes."""
from __future__ import annotations

import torch
from torch import nn
from torch._inductor.utils import run_and_get_code

from backends.engine.quantize import Int4Linear, fuse_sibling_projections
from kernels.quantized_linear import int4_linear


class Attention(nn.Module):
    def __init__(self, hidden: int, kv: int, bias: bool):
        super().__init__()
        self.q_proj = Int4Linear.from_linear(nn.Linear(hidden, hidden, bias=bias), 32)
        self.k_proj = Int4Linear.from_linear(nn.Linear(hidden, kv, bias=bias), 32)
        self.v_proj = Int4Linear.from_linear(nn.Linear(hidden, kv, bias=bias), 32)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)


def test_compiled_siblings_make_one_kernel_call_with_the_same_outputs():
    torch.manual_seed(0)
    model = Attention(128, 64, bias=True)
    x = torch.randn(3, 128)
    with torch.inference_mode():
        separate = [int4_linear(x, layer.packed, layer.scales_and_zeros, 32, layer.bias)
                    for layer in (model.q_proj, model.k_proj, model.v_proj)]
        assert fuse_sibling_projections(model) == 1
        eager = model(x)
        # CompiledDecode freezes the weights; the freezing pass is where the calls merge
        with torch._inductor.config.patch(freezing=True):
            compiled, code = run_and_get_code(torch.compile(model, fullgraph=True), x)
    # inductor may call aten's kernel or its own wrapper of it (int4mm_packed_weight_cpu)
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


def test_layers_that_fill_part_of_a_packing_block_are_not_fused():
    """AVX-512 packs 64 rows per block and a 32-row layer differently: the stacked codes
    would give k and v wrong columns on such a CPU (seen: errors of ~2 against the layers)."""
    model = Attention(128, 32, bias=False)
    assert fuse_sibling_projections(model) == 0
    assert all(layer.fused is None for layer in (model.q_proj, model.k_proj, model.v_proj))
