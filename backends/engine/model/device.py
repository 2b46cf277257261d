"""Where the engine runs: the device, its default dtype, the KV pool's size on a GPU, and
the GPU memory the worker reports. On CPU every answer is what the engine did before."""
from __future__ import annotations

import math
import mmap
from typing import Callable

import torch

from ..device_defaults import defaults_for

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(name: str) -> torch.device:
    """`auto` is CUDA when torch sees a GPU, else CPU; `cuda` without one is an error, not a fallback."""
    if name not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {name!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for, but torch sees no CUDA device")
    return torch.device(name)


def resolve_dtype(name: str | None, device: torch.device) -> torch.dtype:
    """`name`, else the device's default (device_defaults.py)."""
    return getattr(torch, name or defaults_for(device.type).dtype)


def zeroed_on_touch(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Zeros on the CPU in fresh anonymous memory: the OS hands each page over zeroed when it is first
    touched, where torch.zeros writes every byte at once (a start then pays for the whole KV pool)."""
    count = math.prod(shape)
    memory = mmap.mmap(-1, max(1, count * torch.empty((), dtype=dtype).element_size()))
    return torch.frombuffer(memory, dtype=dtype, count=count).view(shape)  # the tensor keeps the map alive


# the choices of the worker's --kv-cache-dtype (and of the benchmarks that run the engine as it does)
KV_CACHE_DTYPES = ("auto", "bfloat16")


def resolve_kv_dtype(name: str | None, model_dtype: torch.dtype, narrow_allowed: bool) -> torch.dtype:
    """The KV pool's dtype: the model's unless `name` says bfloat16, where the device serves a pool
    narrower than the model (`narrow_allowed`: device_defaults.py, on the CPU). A bf16 pool under
    an fp32 model halves the bytes that each decode step reads from it, as llama.cpp's f16
    cache does; the rounding makes greedy output differ from fp32 now and then."""
    if name in (None, "auto"):
        return model_dtype
    dtype = getattr(torch, name, None)
    if dtype not in (torch.bfloat16, torch.float32):
        raise ValueError(f"kv_cache_dtype must be auto, bfloat16 or float32, not {name!r}")
    if dtype != model_dtype and not narrow_allowed:
        raise ValueError("a KV cache dtype other than the model's is supported on the CPU only")
    return dtype


class DoesNotFit(ValueError):
    """The model's weights or its KV pool do not fit the GPU: the worker exits with this one line."""


def kv_budget(total: int, utilization: float, used: int, activation_peak: int) -> int:
    """vLLM's rule: the pool gets `utilization` of the GPU less what is in use (weights, other
    processes) and less the transient peak of one forward at the full token budget."""
    budget = int(total * utilization) - used - activation_peak
    if budget <= 0:
        raise DoesNotFit(f"no GPU memory left for the KV cache at gpu_memory_utilization={utilization}: "
                         f"{used / 2**30:.2f} GiB in use, forward peak {activation_peak / 2**30:.2f} GiB, "
                         f"{total / 2**30:.2f} GiB total")
    return budget


def profiled_kv_bytes(profile: Callable[[], None], utilization: float, device: torch.device) -> int:
    """Run `profile` (one forward at the full token budget) and size the KV pool from what it used."""
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    profile()
    torch.cuda.synchronize(device)
    activation_peak = torch.cuda.max_memory_allocated(device) - before
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info(device)
    return kv_budget(total, utilization, total - free, activation_peak)


def tensor_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors` (tied weights count once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())


def gpu_memory(model: torch.nn.Module, kv_caches: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, int] | None:
    """Bytes of weights, KV pool and the allocator's peak, for the worker's metrics; None on CPU."""
    first = next(model.parameters(), None)
    if first is None or not defaults_for(first.device.type).device_memory:
        return None
    return {
        "weights": tensor_bytes(list(model.parameters()) + list(model.buffers())),
        "kv_cache": tensor_bytes(t for pair in kv_caches for t in pair),
        "peak": torch.cuda.max_memory_allocated(first.device),
    }


class HostCopy:
    """Device tensors on their way to the host. On CUDA the copy goes into pinned memory without
    blocking and an event marks its end, so the host can launch the next step before it waits;
    on CPU the tensors already are host memory."""

    def __init__(self, *tensors: torch.Tensor):
        self.event = None
        if tensors and defaults_for(tensors[0].device.type).runs_ahead:
            pinned = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in tensors]
            for host, t in zip(pinned, tensors):
                host.copy_(t, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()
            tensors = tuple(pinned)
        self.tensors = tensors

    def values(self) -> list[list]:
        """The tensors as lists; waits for the copy only now."""
        if self.event is not None:
            self.event.synchronize()
        return [t.tolist() for t in self.tensors]
