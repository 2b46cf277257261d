"""Stand-ins for the calls only CUDA has, so the CUDA execution plan runs on CPU
(backends/engine/plans.py). Everything else the plan does is the real code."""
from __future__ import annotations

from collections import Counter

import torch

from backends.engine.config import EngineConfig
from backends.engine.plans import ExecutionPlan, choose_plan


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
