"""Stand-ins for the calls only CUDA has, so the CUDA execution plan runs on CPU
(backends/engine/model/plans.py). Everything else the plan does is the real code."""
from __future__ import annotations

import sys
from collections import Counter

import torch

from backends.engine.config import EngineConfig
from backends.engine.model.plans import ExecutionPlan, choose_plan


class GraphCapture:
    """Records a graph as CUDA does in effect: the output is one static tensor, and a replay
    recomputes it from whatever the static input buffers hold then. Counts captures and replays."""

    def __init__(self):
        self.captures, self.replays = 0, Counter()

    def __call__(self, forward, pool):
        self.captures += 1
        output = forward()
        key = tuple(output.shape)

        def replay():
            self.replays[key] += 1
            output.copy_(forward())
        return replay, output, pool


class MemoryBudget:
    """Stands in for the GPU memory queries around the profiling forward: runs it, then grants `bytes`."""

    def __init__(self, granted: int):
        self.granted, self.profiled = granted, 0

    def __call__(self, profile) -> int:
        profile()
        self.profiled += 1
        return self.granted


def cuda_plan_on_cpu(config: EngineConfig, attend=None, kv_bytes: int | None = None, fused_ops=None) -> ExecutionPlan:
    """The CUDA plan for CPU tensors: stand-in capture and, with `kv_bytes`, a stand-in memory budget.
    `attend` and `fused_ops` default to the torch paged attention and fused-kernel set (Triton runs
    only in its interpreter here)."""
    from kernels.fused_reference import TORCH_OPS
    from kernels.paged_attention import paged_attention

    return choose_plan(config, torch.device("cpu"), capture=GraphCapture(), attend=attend or paged_attention,
                       kv_budget=MemoryBudget(kv_bytes) if kv_bytes else None, fused_ops=fused_ops or TORCH_OPS)


class Int4PackMatmul:
    """Stands in for aten's CUDA tinygemm pair (kernels/tinygemm_int4.Ops), with the contract
    int4mm.cu states: the converter takes uint8 [n, k / 2] holding weight 2j in the HIGH nibble
    of byte j, with inner_k_tiles 2, 4 or 8 dividing k / 16 and n a multiple of 8; the matmul
    takes bf16 x [m, k] contiguous, groups of 32 to 256, bf16 (scale, zero) pairs [k / group, n, 2],
    and returns x @ ((q - 8) * scale + zero)^T in bf16. Its packed form (the codes, int32 [n, k])
    is its own business, as aten's is. Counts its calls."""

    def __init__(self):
        self.converted = self.multiplied = 0

    def convert(self, packed: torch.Tensor, inner_k_tiles: int) -> torch.Tensor:
        n, half_k = packed.shape
        assert packed.dtype == torch.uint8 and packed.is_contiguous(), packed.dtype
        assert inner_k_tiles in (2, 4, 8) and (2 * half_k) % (16 * inner_k_tiles) == 0 and n % 8 == 0
        self.converted += 1
        return torch.stack([packed >> 4, packed & 0xF], dim=-1).reshape(n, 2 * half_k).to(torch.int32)

    def mm(self, x: torch.Tensor, codes: torch.Tensor, group_size: int, scales_and_zeros: torch.Tensor) -> torch.Tensor:
        n, k = codes.shape
        assert x.dtype == torch.bfloat16 and x.dim() == 2 and x.is_contiguous() and x.shape[1] == k
        assert group_size in (32, 64, 128, 256) and scales_and_zeros.dtype == torch.bfloat16
        assert scales_and_zeros.shape == (k // group_size, n, 2)
        scale, zero = (part.float().t().repeat_interleave(group_size, dim=1) for part in scales_and_zeros.unbind(-1))
        self.multiplied += 1
        return (x.float() @ ((codes.float() - 8) * scale + zero).t()).to(torch.bfloat16)

    def ops(self):
        from kernels.tinygemm_int4 import Ops

        return Ops(self.convert, self.mm)


def install_tinygemm(monkeypatch) -> Int4PackMatmul:
    """tinygemm's CUDA pair replaced by the stand-in for this test (kernels/tinygemm_int4.OPS)."""
    from kernels import tinygemm_int4

    ops = Int4PackMatmul()
    monkeypatch.setattr(tinygemm_int4, "OPS", ops.ops())
    return ops


class OutOfMemoryAt:
    """The runner's forward, raising torch.OutOfMemoryError on the calls numbered in `calls`."""

    def __init__(self, runner, calls: set[int]):
        self.forward, self.calls, self.count = runner.forward, calls, 0
        runner.forward = self

    def __call__(self, *args, **kwargs):
        self.count += 1
        if self.count in self.calls:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return self.forward(*args, **kwargs)


class GemLiteStandIn:
    """Stands in for the optional `gemlite` package (kernels/gemlite_int4.py), with the contract its
    README and tests state: gemlite.core.GemLiteLinear(W_nbits, group_size, in_features, out_features,
    input_dtype, output_dtype), .pack(W_q uint8 [n, k], scales and zeros [n * k / group, 1] in row
    order, bias), then layer(x) = x @ ((W_q - zero) * scale)^T in the output dtype. `install` puts it
    in sys.modules as `gemlite` and `gemlite.core`. Counts its calls."""

    def __init__(self):
        import importlib.machinery
        import types

        self.packed = self.multiplied = 0
        stand_in = self

        class Layer:
            def __init__(self, W_nbits, group_size, in_features, out_features, input_dtype, output_dtype):
                assert W_nbits == 4 and in_features % group_size == 0
                self.group_size, self.shape, self.dtype = group_size, (out_features, in_features), output_dtype

            def pack(self, W_q, scales, zeros, bias):
                n, k = self.shape
                assert W_q.dtype == torch.uint8 and tuple(W_q.shape) == (n, k) and bias is None
                assert scales.shape == zeros.shape == (n * k // self.group_size, 1)
                groups = W_q.float().reshape(-1, self.group_size)
                self.weight = ((groups - zeros.float()) * scales.float()).reshape(n, k)
                stand_in.packed += 1

            def __call__(self, x):
                stand_in.multiplied += 1
                return (x.float() @ self.weight.t()).to(self.dtype)

        core = types.ModuleType("gemlite.core")
        core.GemLiteLinear = Layer
        core.DType = types.SimpleNamespace(BF16=torch.bfloat16, FP16=torch.float16)
        package = types.ModuleType("gemlite")
        package.core = core
        for module in (package, core):
            module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
        self.modules = {"gemlite": package, "gemlite.core": core}

    def install(self, monkeypatch) -> "GemLiteStandIn":
        for name, module in self.modules.items():
            monkeypatch.setitem(sys.modules, name, module)
        return self
