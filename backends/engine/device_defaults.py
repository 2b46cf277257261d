"""What differs per device: the one table of it, the defaults of settings left unset and what the
device itself does differently. Keys are device types ("cpu", "cuda"): `EngineConfig` resolves
"auto" once (model/device.py's resolve_device) before any of these is read; the plan
(model/plans.py) is chosen from it, and the rest of the engine reads the plan or this table, never
the device type. The figures behind them are in docs/gpu.md and docs/engine-cpu.md."""
from __future__ import annotations

from dataclasses import dataclass

from kernels import cpu_kernels


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
    # what the device does, not a setting:
    # weights are copied out of safetensors' memory map once (matmuls on file-backed pages ran far
    # slower on CPU); a move to a GPU leaves the map behind anyway
    weights_out_of_map: bool
    host_kernels: bool  # our C++ CPU kernels (kernels/cpu_kernels.py), loaded before any step is traced
    narrow_kv_pool: bool  # a KV pool narrower than the model (bf16 under fp32) is served: CPU attention only
    device_memory: bool  # the device answers memory queries: weights fit, pool sizing, metrics
    runs_ahead: bool  # the device runs ahead of the host: tokens come back through pinned memory and an event
    # the KV pool lies in fresh anonymous memory that the OS zeroes page by page on first touch, so a
    # start writes none of it (model/device.py's zeroed_on_touch)
    pool_zeroed_on_touch: bool


DEFAULTS = {
    "cpu": DeviceDefaults(max_num_batched_tokens=512, max_num_seqs=64, dtype="float32",
                          cuda_graphs=False, fuse_kernels=False,
                          weights_out_of_map=True, host_kernels=True, narrow_kv_pool=True, device_memory=False,
                          runs_ahead=False, pool_zeroed_on_touch=True),
    "cuda": DeviceDefaults(max_num_batched_tokens=4096, max_num_seqs=256, dtype="bfloat16",
                           cuda_graphs=True, fuse_kernels=True,
                           weights_out_of_map=False, host_kernels=False, narrow_kv_pool=False, device_memory=True,
                           runs_ahead=True, pool_zeroed_on_touch=False),
}


def defaults_for(device_type: str) -> DeviceDefaults:
    return DEFAULTS["cuda" if device_type == "cuda" else "cpu"]


# The worker's plan flags left unset. For an int4 model on CPU: decode steps compiled with the
# weights frozen in, dense weights for prompt chunks, a bf16 KV pool (the fastest plan measured:
# docs/engine-cpu.md, "The default plan for an int4 worker"); elsewhere the plain settings.
FAST_INT4_CPU = {"compile_decode": True, "int4_dense_prefill": True, "kv_cache_dtype": "bfloat16"}
PLAIN = {"compile_decode": False, "int4_dense_prefill": False, "kv_cache_dtype": "auto"}
# kernel builds whose int4 products beat a dense fp32 GEMM at every row count (the AVX2 build's
# byte products), so prompt chunks stay on int4 there
INT4_BEATS_DENSE = ("avx2",)


def plan_defaults(device_type: str, quantization: str | None) -> dict:
    """The worker's settings for flags left unset: the fastest measured plan for the device."""
    if device_type == "cpu" and quantization == "int4":
        return dict(FAST_INT4_CPU, int4_dense_prefill=cpu_kernels.ACTIVE_ISA not in INT4_BEATS_DENSE)
    return dict(PLAIN)
