"""Which matmul a weight-only quantized layer runs: the one place that decides, for layers
quantized at load time (quantize.py), read from AWQ / GPTQ folders (int4_checkpoints.py) and
built layer by layer (layerwise.py). quantize.py re-exports all of it.

int4 on CUDA: aten's tinygemm (kernels/tinygemm_int4.py) on sm80+ for bf16 models, where the
layer's shape fits it; the Triton kernel otherwise (fp16 / fp32 models keep their activation
precision there, older GPUs and odd shapes run at all). On CPU our C++ kernel where it builds,
takes the layer's width and group, else aten's.
"""
from __future__ import annotations

from enum import StrEnum

import torch
from torch import nn

from kernels import cpu_kernels, tinygemm_int4
from kernels.quantized_linear import ACT_DTYPE


class Kernel(StrEnum):
    """The matmul a quantized layer runs. int8 layers take the same names: on CPU int8_linear
    picks its kernel itself, on CUDA they run Triton's."""
    CPP = "cpp"        # CPU: our C++ int4 kernel
    ATEN = "aten"      # CPU: aten's int4 kernel (no compiler needed)
    TRITON = "triton"  # CUDA: the Triton GEMM / GEMV (on CPU only in the interpreter)
    TINYGEMM = "tinygemm"  # CUDA sm80+: aten's int4 tensor-core kernel, bf16 activations


KERNELS = tuple(Kernel)
CPU_KERNELS = (Kernel.CPP, Kernel.ATEN)
# the group sizes each int4 kernel takes: our C++ tiles 32 or 64 (kernels/csrc/int4_linear_cpu.cpp),
# aten's CPU kernel up to 256, Triton's group-wide blocks any power of two from 32 (tl.dot needs 16)
KERNEL_GROUPS = {Kernel.CPP: (32, 64), Kernel.ATEN: (32, 64, 128, 256), Kernel.TRITON: (32, 64, 128, 256),
                 Kernel.TINYGEMM: tinygemm_int4.GROUPS}


def cpu_kernel(in_features: int = 0) -> Kernel:
    """Our C++ kernels where they build and take the layer's width, else aten's."""
    return Kernel.CPP if in_features <= cpu_kernels.MAX_IN_FEATURES and cpu_kernels.available() else Kernel.ATEN


def int4_kernel(device: torch.device | str, in_features: int, out_features: int, group_size: int,
                dtype: torch.dtype = ACT_DTYPE, asked: Kernel | str | None = None) -> Kernel:
    """The kernel an int4 layer [out_features, in_features] with activations in `dtype` runs on
    `device`. `asked` (a caller's explicit kernel) is kept, except tinygemm for a layer it cannot
    take, which falls back to Triton. ValueError, naming the group size, where no kernel takes it."""
    device = torch.device(device)
    if asked is not None:
        kernel = Kernel(asked)
        fits = tinygemm_int4.takes(out_features, in_features, group_size, dtype)
        return Kernel.TRITON if kernel == Kernel.TINYGEMM and not fits else kernel
    if device.type == "cpu":
        kernel = cpu_kernel(in_features)
        kernel = kernel if group_size in KERNEL_GROUPS[kernel] else Kernel.ATEN
    elif device.type == "cuda":
        fits = tinygemm_int4.runs_on(device) and tinygemm_int4.takes(out_features, in_features, group_size, dtype)
        kernel = Kernel.TINYGEMM if fits else Kernel.TRITON
    else:
        raise ValueError(f"int4 layers are served on CPU or CUDA, not on {device.type}")
    if group_size not in KERNEL_GROUPS[kernel]:
        raise ValueError(f"int4 group_size {group_size} is not served on {device.type}: "
                         f"the {kernel} int4 kernel takes groups of {KERNEL_GROUPS[kernel]}")
    return kernel


def int8_kernel(kernel: Kernel) -> Kernel:
    """int8 layers (the LM head of an int4 model too) have no tinygemm: Triton's on CUDA."""
    return Kernel.TRITON if kernel == Kernel.TINYGEMM else kernel


def default_kernel(model: nn.Module) -> Kernel:
    """The model's device family: Triton on CUDA models, cpu_kernel() on CPU ones (int4 layers
    then pick per layer with int4_kernel); other devices have no kernel here."""
    devices = {p.device.type for p in model.parameters()}
    if devices <= {"cpu"}:
        return cpu_kernel()
    if devices == {"cuda"}:
        return Kernel.TRITON
    raise ValueError(f"weight-only quantization runs on CPU or CUDA models, not on {sorted(devices)}")
