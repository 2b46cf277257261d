"""The decode measurements of `benchmarks.engine`: single-stream decode speed against the
memory-bandwidth limit, and throughput with a fixed number of requests in flight.

The limit: a decode step of one sequence reads every weight once, so it cannot run faster
than (weight bytes read per step) / (memory bandwidth). The bandwidth is measured, as the
bytes a large device-to-device copy reads and writes per second; the weight bytes are all
parameters and buffers except an untied input embedding (a step reads one row of it).
"""
from __future__ import annotations

import time

import torch

from backends.engine import SamplingParams
from backends.engine.model.device import tensor_bytes


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def copy_bandwidth(device: torch.device, megabytes: int = 512, repeats: int = 5) -> float:
    """Best bytes/s (read + write) of copying a `megabytes` buffer on `device`."""
    src = torch.empty(megabytes << 20, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        begin = time.perf_counter()
        dst.copy_(src)
        _sync(device)
        best = min(best, time.perf_counter() - begin)
    return 2 * src.numel() / best


def weight_bytes_per_step(model: torch.nn.Module) -> int:
    embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
    total = tensor_bytes(list(model.parameters()) + list(model.buffers()))
    # a quantized head has codes, no weight; an Int8Embedding reads those codes, with no table of its own
    own, head_weight = getattr(embedding, "weight", None), getattr(head, "weight", None)
    tied = own is None or (head_weight is not None and head_weight.data_ptr() == own.data_ptr())
    return total if tied else total - tensor_bytes([own])


def single_stream(engine, prompt: list[int], tokens: int, bandwidth: float, warmup: int = 0) -> dict:
    """One request alone; decode tok/s over `tokens` tokens after its first `warmup` ones (prefill
    excluded): the first decode steps after a build pay for lazy setup (kernel compiles, cuBLAS
    handles, allocator growth), which a serving engine has long paid."""
    seq = engine.add_request(prompt, SamplingParams(max_tokens=tokens + warmup, temperature=0.0, ignore_eos=True))
    stamps = []
    while engine.has_work():
        if engine.step():
            stamps.append(time.perf_counter())
    stamps = stamps[warmup:]
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    limit = bandwidth / weight_bytes_per_step(engine.model)
    assert seq.is_finished
    return {"decode_tokens_per_s": round(rate, 2), "bandwidth_limit_tokens_per_s": round(limit, 2),
            "fraction_of_limit": round(rate / limit, 4), "weight_bytes_per_step": weight_bytes_per_step(engine.model),
            "copy_bandwidth_gb_s": round(bandwidth / 1e9, 2), "tokens": tokens, "warmup_tokens": warmup}


def at_concurrency(engine, prompts: list[list[int]], out_lens: list[int], concurrency: int) -> dict:
    """The first `concurrency` requests submitted at once; output tok/s until all are done."""
    chosen = list(range(min(concurrency, len(prompts))))
    for i in chosen:
        engine.add_request(prompts[i], SamplingParams(max_tokens=out_lens[i], temperature=0.0, ignore_eos=True))
    begin = time.perf_counter()
    produced = 0
    while engine.has_work():
        produced += len(engine.step())
    elapsed = time.perf_counter() - begin
    return {"concurrency": len(chosen), "tokens_per_s": round(produced / elapsed, 2), "output_tokens": produced,
            "elapsed_s": round(elapsed, 2)}
