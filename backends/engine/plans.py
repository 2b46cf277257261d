"""How the engine executes on its device, chosen once when a runner is built (choose_plan).

A plan says which attention kernels run, how the KV pool is sized, which path pure decode
steps take, and whether step inputs are copied to the device. ModelRunner reads the plan
instead of testing the device at each branch.

What only CUDA has (the memory queries that size the pool, graph capture) is reached through
two of the plan's members, which tests replace with stand-ins: the CUDA plan's own Python
(construction order, pool sizing, capture, replay, padding, sampling on the logits' device)
runs under `make test` on CPU (tests/backends/test_cuda_plan.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import Callable

import torch

from kernels.paged_attention import paged_attention

from .config import EngineConfig
from .cuda_graphs import capture_cuda_graph
from .device import profiled_kv_bytes


class Decode(StrEnum):
    EAGER = "eager"  # every step through the model as loaded
    GRAPHS = "cuda-graphs"  # pure decode steps replay one captured graph per batch bucket
    STATIC = "static"  # the graphs' static, padded buffers, run eagerly (CPU: tests that path)
    COMPILED = "compiled"  # CPU: one whole-model torch.compile graph per decode step


@dataclass(frozen=True)
class ExecutionPlan:
    device: torch.device
    decode: Decode
    attend: Callable  # paged attention over the pool (torch/C++ on CPU, Triton on CUDA)
    moves_inputs: bool  # step metadata is built on the host and copied over once per step
    # kv_budget(profile) -> bytes the KV pool may take after `profile` (a forward at the full token
    # budget) ran; None: the pool is config.kv_cache_bytes
    kv_budget: Callable[[Callable[[], None]], int] | None = None
    # capture(forward, pool) -> (replay, output, pool): forward() recorded as a CUDA graph (GRAPHS only)
    capture: Callable | None = None

    @property
    def name(self) -> str:
        return f"{self.device.type}/{self.decode}"


def triton_attention() -> Callable:
    from kernels.triton_paged_attention import triton_paged_attention  # triton is imported only where it runs

    return triton_paged_attention


def choose_plan(config: EngineConfig, device: torch.device, *, kv_budget: Callable | None = None,
                capture: Callable | None = None, attend: Callable | None = None) -> ExecutionPlan:
    """The plan for `device`. The keywords stand in for what only CUDA has: `capture` (graph
    capture) with `attend` choose the CUDA plan for tensors on another device, as tests do on
    CPU; `kv_budget` replaces the GPU memory queries that size the pool."""
    if device.type == "cuda" or capture is not None:
        if config.compile_decode:
            raise ValueError("compile_decode (--compile) is for the CPU: on CUDA, decode steps replay CUDA graphs")
        utilization = config.gpu_memory_utilization
        if kv_budget is None and utilization is not None and config.num_blocks is None:
            kv_budget = partial(profiled_kv_bytes, utilization=utilization, device=device)
        decode = Decode.EAGER if config.cuda_graphs is False else Decode.GRAPHS
        return ExecutionPlan(device, decode, attend or triton_attention(), moves_inputs=True, kv_budget=kv_budget,
                             capture=capture or partial(capture_cuda_graph, device=device))
    decode = Decode.COMPILED if config.compile_decode else Decode.STATIC if config.cuda_graphs else Decode.EAGER
    return ExecutionPlan(device, decode, attend or paged_attention, moves_inputs=False, kv_budget=kv_budget)


# The fastest CPU plan measured for an int4 model (SmolLM2-135M on 2 cores: 161 against 57 tok/s
# single-stream eager, 414 tok/s at 16 streams; docs/engine-cpu.md): decode steps compiled with the
# weights frozen in, dense weights for prompt chunks, a bf16 KV pool. Elsewhere nothing was
# measured faster than the plain settings.
FAST_INT4_CPU = {"compile_decode": True, "int4_dense_prefill": True, "kv_cache_dtype": "bfloat16"}
PLAIN = {"compile_decode": False, "int4_dense_prefill": False, "kv_cache_dtype": "auto"}


def plan_defaults(device: torch.device, quantization: str | None) -> dict:
    """The worker's settings for flags left unset: the fastest measured plan for the device."""
    return dict(FAST_INT4_CPU if device.type == "cpu" and quantization == "int4" else PLAIN)
