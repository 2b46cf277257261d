"""What the engine does on each device for a setting left unset: the one table of them. Keys are
device types ("cpu", "cuda"): `EngineConfig` resolves "auto" once (model/device.py's resolve_device)
before any of these is read. The figures behind them are in docs/gpu.md and docs/engine-cpu.md."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceDefaults:
    # a step's token budget and running sequences: on CPU a step's cost grows with its tokens at
    # once; on a GPU a small step leaves most of it idle
    max_num_batched_tokens: int
    max_num_seqs: int
    # the model's dtype: bf16 on GPUs (tensor cores, half the weight bytes per decode step); fp32
    # on CPU, where bf16 matmuls are slower than fp32 outside the quantized kernels
    dtype: str
    cuda_graphs: bool  # pure decode steps replay captured graphs (engine/model/cuda_graphs.py)
    fuse_kernels: bool  # fused norm/rotary/SiLU kernels, merged projections (engine/model/fusion.py)


DEFAULTS = {
    "cpu": DeviceDefaults(max_num_batched_tokens=512, max_num_seqs=64, dtype="float32",
                          cuda_graphs=False, fuse_kernels=False),
    "cuda": DeviceDefaults(max_num_batched_tokens=4096, max_num_seqs=256, dtype="bfloat16",
                           cuda_graphs=True, fuse_kernels=True),
}


def defaults_for(device_type: str) -> DeviceDefaults:
    return DEFAULTS["cuda" if device_type == "cuda" else "cpu"]


# The worker's plan flags left unset: the fastest CPU plan for an int4 model (docs/engine-cpu.md):
# decode steps compiled with the weights frozen in, dense weights for prompt chunks, a bf16 KV
# pool. Elsewhere nothing was measured faster than the plain settings.
FAST_INT4_CPU = {"compile_decode": True, "int4_dense_prefill": True, "kv_cache_dtype": "bfloat16"}
PLAIN = {"compile_decode": False, "int4_dense_prefill": False, "kv_cache_dtype": "auto"}


def plan_defaults(device_type: str, quantization: str | None) -> dict:
    """The worker's settings for flags left unset: the fastest measured plan for the device."""
    return dict(FAST_INT4_CPU if device_type == "cpu" and quantization == "int4" else PLAIN)
