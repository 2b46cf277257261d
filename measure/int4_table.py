"""Each int4 kernel against a bf16 matmul, per number of rows, over the projections of one
decoder layer of a model's shape; and the row table (backends/engine/quant/int4_kernels.py) the
measurement chooses: for each row count, the kernel with the least time summed over the shapes
measured, relative to bf16. `gpu_check --only int4_table` runs it on a GPU and writes the table
where TIERGATE_INT4_TABLE can point; tests run it on CPU with the CUDA calls stood in for."""
from __future__ import annotations

import time
from typing import Callable

import torch

from backends.engine.quant.int4_kernels import Int4RowKernels, RowKernel, RowTable, missing

ROWS = (1, 4, 16, 64, 256, 4096)
GROUP_SIZE = 32
# a timer: (kernel name, rows, the call) -> seconds per call
Timer = Callable[[str, int, Callable[[], object]], float]


def projection_shapes(hidden: int, intermediate: int, heads: int, kv_heads: int, head_dim: int) -> list[tuple[int, int]]:
    """(out_features, in_features) of a Llama decoder layer's q, k, v, o, gate, up and down."""
    q, kv = heads * head_dim, kv_heads * head_dim
    return [(q, hidden), (kv, hidden), (kv, hidden), (hidden, q), (intermediate, hidden), (intermediate, hidden),
            (hidden, intermediate)]


def cuda_timer(kernel: str, rows: int, call: Callable[[], object], budget_s: float = 0.05, most: int = 20) -> float:
    """Seconds per call on the GPU: one warm call, one timed, then as many as fit `budget_s` (3 to `most`)."""
    call()
    torch.cuda.synchronize()
    began = time.perf_counter()
    call()
    torch.cuda.synchronize()
    repeats = max(3, min(most, int(budget_s / max(time.perf_counter() - began, 1e-6))))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        call()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000 / repeats


def candidates(shapes: list[tuple[int, int]]) -> tuple[list[RowKernel], dict[str, str]]:
    """The kernels every shape can run, and why each other one cannot."""
    found, why = [], {}
    for kernel in RowKernel:
        reasons = [r for n, k in shapes if (r := missing(kernel, n, k, GROUP_SIZE, torch.bfloat16))]
        if reasons:
            why[str(kernel)] = reasons[0]
        else:
            found.append(kernel)
    return found, why


def _holding(kernels: list[RowKernel]) -> RowTable:
    """A table naming every kernel, so a layer built on it keeps every packing they read."""
    return RowTable(tuple((i + 1, k) for i, k in enumerate(kernels[:-1])) + ((None, kernels[-1]),))


def _layer(n: int, k: int, kernels: list[RowKernel], device: torch.device, gen: torch.Generator):
    codes = torch.randint(0, 16, (n, k), dtype=torch.uint8, device=device, generator=gen)
    scales = 0.004 * (0.5 + torch.rand(n, k // GROUP_SIZE, device=device, generator=gen))
    int4 = Int4RowKernels(codes, scales, -8 * scales, GROUP_SIZE, _holding(kernels))
    return int4, torch.randn(n, k, device=device, generator=gen).to(torch.bfloat16)


def _agreement(layer: Int4RowKernels, kernels: list[RowKernel], x: torch.Tensor) -> dict[str, float]:
    """Each kernel's largest error against x times the dequantized weights, relative to the largest output."""
    if layer.along_k is None:
        return {}
    expected = x.float() @ layer.dequantized().t()
    scale = expected.abs().max().item() or 1.0
    return {str(k): round((layer.run(k, x).float() - expected).abs().max().item() / scale, 5) for k in kernels}


def measure_shape(shapes: list[tuple[int, int]], kernels: list[RowKernel], rows: tuple[int, ...], timer: Timer,
                  device: torch.device, seed: int = 0) -> dict:
    """Seconds per layer (every projection once) for bf16 and each kernel, at each row count."""
    gen = torch.Generator(device=device).manual_seed(seed)
    layers = [_layer(n, k, kernels, device, gen) for n, k in shapes]
    seconds: dict[str, dict[int, float]] = {name: {} for name in ["bf16", *map(str, kernels)]}
    for count in rows:
        inputs = {k: torch.randn(count, k, device=device, generator=gen).to(torch.bfloat16) for _, k in shapes}
        seconds["bf16"][count] = timer("bf16", count, lambda: [torch.nn.functional.linear(inputs[w.shape[1]], w)
                                                              for _, w in layers])
        for kernel in kernels:
            seconds[str(kernel)][count] = timer(str(kernel), count, lambda kernel=kernel: [
                int4.run(kernel, inputs[w.shape[1]]) for int4, w in layers])
    x = torch.randn(rows[min(1, len(rows) - 1)], shapes[0][1], device=device, generator=gen).to(torch.bfloat16)
    return {"seconds": seconds, "max_relative_error": _agreement(layers[0][0], kernels, x)}


def choose_table(measured: dict[str, dict], kernels: list[RowKernel], rows: tuple[int, ...]) -> RowTable:
    """Per row count, the kernel of least time relative to bf16 summed over the shapes; neighbours merged."""
    steps: list[tuple[int | None, RowKernel]] = []
    for count in rows:
        best = min(kernels, key=lambda k: sum(m["seconds"][str(k)][count] / m["seconds"]["bf16"][count]
                                             for m in measured.values()))
        if steps and steps[-1][1] == best:
            steps.pop()
        steps.append((count, best))
    steps[-1] = (None, steps[-1][1])
    return RowTable(tuple(steps))


def int4_kernel_table(shapes: dict[str, list[tuple[int, int]]], timer: Timer, device: torch.device,
                      rows: tuple[int, ...] = ROWS, seed: int = 0) -> dict:
    """{"candidates", "not_candidates", "shapes": {name: {"x_bf16": {kernel: {rows: speed vs bf16}},
    "bf16_us": {rows: us}, "max_relative_error"}}, "int4_row_table": [[rows, kernel], ...]}."""
    kernels, why = candidates([s for layer in shapes.values() for s in layer])
    measured = {name: measure_shape(layer, kernels, rows, timer, device, seed) for name, layer in shapes.items()}
    report = {}
    for name, m in measured.items():
        bf16 = m["seconds"]["bf16"]
        report[name] = {"bf16_us": {str(r): round(bf16[r] * 1e6, 1) for r in rows},
                        "x_bf16": {str(k): {str(r): round(bf16[r] / m["seconds"][str(k)][r], 3) for r in rows}
                                   for k in kernels},
                        "max_relative_error": m["max_relative_error"]}
    return {"candidates": [str(k) for k in kernels], "not_candidates": why, "rows": list(rows), "shapes": report,
            "int4_row_table": choose_table(measured, kernels, rows).to_rows()}
