"""How the engine executes on its device, chosen once when a runner is built (choose_plan).

A plan says which attention kernels run, how the KV pool is sized, which path pure decode
steps take, and whether step inputs are copied to the device. ModelRunner reads the plan
instead of testing the device at each branch.

The CUDA plan also fuses the model's elementwise kernels and sibling projections
(engine/model/fusion.py) unless config.fuse_kernels is False.

What only CUDA has (the memory queries that size the pool, graph capture) is reached through
two of the plan's members, which tests replace with stand-ins: the CUDA plan's own Python
(construction order, pool sizing, capture, replay, padding, sampling on the logits' device)
runs under `make test` on CPU (tests/backends/engine/model/test_plans.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import Callable

import torch

from kernels import cpu_kernels
from kernels.fused_reference import TORCH_OPS, FusedOps, triton_ops
from kernels.paged_attention import paged_attention

from ..config import EngineConfig
from ..device_defaults import DeviceDefaults, defaults_for
from .cuda_graphs import capture_cuda_graph
from .device import profiled_kv_bytes
from .fusion import fuse_model


class Decode(StrEnum):
    EAGER = "eager"  # every step through the model as loaded
    GRAPHS = "cuda-graphs"  # pure decode steps replay one captured graph per batch bucket
    PADDED = "padded"  # CPU: the graphs' static, padded buffers run eagerly, nothing captured (config.padded_decode)
    COMPILED = "compiled"  # CPU: one whole-model torch.compile graph per decode step


@dataclass(frozen=True)
class ExecutionPlan:
    device: torch.device
    defaults: DeviceDefaults  # what the plan's device does (device_defaults.py): CUDA's for the CUDA plan anywhere
    decode: Decode
    attend: Callable  # paged attention over the pool (torch/C++ on CPU, Triton on CUDA)
    moves_inputs: bool  # step metadata is built on the host and copied over once per step
    # kv_budget(profile) -> bytes the KV pool may take after `profile` (a forward at the full token
    # budget) ran; None: the pool is config.kv_cache_bytes
    kv_budget: Callable[[Callable[[], None]], int] | None = None
    # capture(forward, pool) -> (replay, output, pool): forward() recorded as a CUDA graph (GRAPHS only)
    capture: Callable | None = None
    # fuse(model): fused kernels and merged projections swapped in (engine/model/fusion.py); None: the model as loaded
    fuse: Callable | None = None

    def prepare(self, model: torch.nn.Module) -> None:
        """What the plan changes in the model, once, before the pool is sized and graphs are captured."""
        if self.defaults.host_kernels:
            cpu_kernels.available()  # built or loaded now, never while a step is traced
        if self.fuse is not None:
            self.fuse(model)

    @property
    def name(self) -> str:
        return f"{self.device.type}/{self.decode}"


def triton_attention() -> Callable:
    from kernels.triton_paged_attention import triton_paged_attention  # triton is imported only where it runs

    return triton_paged_attention


def fusion(config: EngineConfig, device_type: str, ops: Callable[[], FusedOps]) -> Callable | None:
    """fuse(model) when config.fuse_kernels (or, unset, the device's default) says so; an explicit
    request makes a model of a family we do not fuse an error rather than a log line."""
    wanted = config.fuse_kernels
    if not (defaults_for(device_type).fuse_kernels if wanted is None else wanted):
        return None
    return partial(fuse_model, ops=ops(), explicit=config.fuse_kernels is True)


def choose_plan(config: EngineConfig, device: torch.device, *, kv_budget: Callable | None = None,
                capture: Callable | None = None, attend: Callable | None = None,
                fused_ops: FusedOps | None = None) -> ExecutionPlan:
    """The plan for `device`. The keywords stand in for what only CUDA has: `capture` (graph
    capture) with `attend` and `fused_ops` choose the CUDA plan for tensors on another device, as
    tests do on CPU; `kv_budget` replaces the GPU memory queries that size the pool."""
    if device.type == "cuda" or capture is not None:
        for name in ("compile_decode", "padded_decode"):
            if getattr(config, name):
                raise ValueError(f"{name} is a CPU decode path: on CUDA, decode steps replay CUDA graphs (cuda_graphs)")
        utilization = config.gpu_memory_utilization
        if kv_budget is None and utilization is not None and config.num_blocks is None:
            kv_budget = partial(profiled_kv_bytes, utilization=utilization, device=device)
        cuda = defaults_for("cuda")
        graphs = cuda.cuda_graphs if config.cuda_graphs is None else config.cuda_graphs
        return ExecutionPlan(device, cuda, Decode.GRAPHS if graphs else Decode.EAGER, attend or triton_attention(),
                             moves_inputs=True, kv_budget=kv_budget,
                             capture=capture or partial(capture_cuda_graph, device=device),
                             fuse=fusion(config, "cuda", lambda: fused_ops or triton_ops()))
    decode = Decode.COMPILED if config.compile_decode else Decode.PADDED if config.padded_decode else Decode.EAGER
    return ExecutionPlan(device, defaults_for("cpu"), decode, attend or paged_attention, moves_inputs=False, kv_budget=kv_budget,
                         fuse=fusion(config, "cpu", lambda: fused_ops or TORCH_OPS))

