"""`gpu_check`'s prefill and profile steps, on the random Llama-3.2-1B of its engine step.

- prefill: 64 prompts of 500 tokens submitted at once, one output token each: prompt tok/s.
- profile: decode steps at batch 1 and 64 (200-token prompts, after 40 warm steps): wall time
  per step against GPU kernel time per step (torch profiler), the top kernels, and the host
  functions by their own time (cProfile); each table is written as a file beside the JSON,
  the figures returned.
"""
from __future__ import annotations

import cProfile
import io
import pstats
import random
import time
from pathlib import Path

import torch

from backends.engine import SamplingParams
from backends.engine.core.llm_engine import LLMEngine
from benchmarks.engine import log
from benchmarks.gpu_check_steps import PROMPT_TOKENS, TOKENIZER_VOCAB, engine_1b, warm, workload
from benchmarks.engine_models import random_prompt

PREFILL_REQUESTS = 64
PROFILE_BATCHES = (1, 64)
PROFILE_PROMPT_TOKENS = 200
WARM_STEPS, TIMED_STEPS, HOST_STEPS, KERNEL_STEPS = 40, 30, 20, 10
PROFILE_OUTPUT_TOKENS = WARM_STEPS + TIMED_STEPS + HOST_STEPS + KERNEL_STEPS + 8  # a few past the measured steps
TOP = 8  # rows of each table in the JSON (the files hold more)


def step_prefill(seed: int, out_dir: Path) -> dict:
    """Prompt tokens per second over 64 x 500-token prompts, each asking one token (prefill alone)."""
    engine = engine_1b(seed)
    warm(engine, seed)
    prompts = workload(PREFILL_REQUESTS, seed + 11)  # not step_engine's: no prefix-cache hits
    params = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
    torch.cuda.synchronize()
    began = time.perf_counter()
    engine.generate(prompts, params)
    elapsed = time.perf_counter() - began
    tokens = PREFILL_REQUESTS * PROMPT_TOKENS
    out = {"prompts": PREFILL_REQUESTS, "prompt_tokens": tokens, "elapsed_s": round(elapsed, 3),
           "prompt_tokens_per_s": round(tokens / elapsed, 1), "max_num_batched_tokens": engine.config.max_num_batched_tokens}
    log(f"prefill: {out}")
    return out


def _fill(engine: LLMEngine, batch: int, rng: random.Random) -> None:
    for _ in range(batch):
        engine.add_request(random_prompt(rng, TOKENIZER_VOCAB, PROFILE_PROMPT_TOKENS),
                           SamplingParams(max_tokens=PROFILE_OUTPUT_TOKENS, temperature=0.0, ignore_eos=True))
    for _ in range(WARM_STEPS):  # prefills done, every graph bucket warm
        engine.step()


def _wall_ms(engine: LLMEngine) -> float:
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(TIMED_STEPS):
        engine.step()
    torch.cuda.synchronize()
    return (time.perf_counter() - began) / TIMED_STEPS * 1000


def _host(engine: LLMEngine) -> tuple[list, str]:
    """Host functions by own time (ms per step), and cProfile's table."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(HOST_STEPS):
        engine.step()
    profile.disable()
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text).sort_stats("tottime")
    stats.print_stats(30)
    rows = sorted(((own, f"{Path(file).name}:{line}({name})") for (file, line, name), (_, _, own, _, _)
                   in stats.stats.items()), reverse=True)[:TOP]
    return [[where, round(own / HOST_STEPS * 1000, 3)] for own, where in rows], text.getvalue()


def _kernels(engine: LLMEngine) -> tuple[float, list, str]:
    """GPU kernel ms per step, the top kernels (ms per step), and the profiler's table."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as profiler:
        for _ in range(KERNEL_STEPS):
            engine.step()
        torch.cuda.synchronize()
    events = [e for e in profiler.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    total_us = sum(e.self_device_time_total for e in events)
    top = sorted(events, key=lambda e: e.self_device_time_total, reverse=True)[:TOP]
    table = profiler.key_averages().table(sort_by="self_cuda_time_total", row_limit=30, max_name_column_width=90)
    return (total_us / KERNEL_STEPS / 1000,
            [[e.key[:90], round(e.self_device_time_total / KERNEL_STEPS / 1000, 4)] for e in top], table)


def step_profile(seed: int, out_dir: Path) -> dict:
    """Decode steps at batch 1 and 64: wall against GPU kernel time, top kernels and host functions."""
    engine = engine_1b(seed)
    warm(engine, seed)
    rng, out = random.Random(seed + 13), {"files": []}
    for batch in PROFILE_BATCHES:
        _fill(engine, batch, rng)
        wall = _wall_ms(engine)
        host, host_table = _host(engine)
        kernel_ms, kernels, kernel_table = _kernels(engine)
        for kind, text in (("host", host_table), ("kernels", kernel_table)):
            path = out_dir / f"profile_batch_{batch}_{kind}.txt"
            path.write_text(f"decode step at batch {batch}: wall {wall:.3f} ms, GPU kernels {kernel_ms:.3f} ms\n\n{text}")
            out["files"].append(str(path))
        out[f"batch_{batch}"] = {"step_wall_ms": round(wall, 3), "gpu_kernel_ms": round(kernel_ms, 3),
                                 "wall_over_kernel_time": round(wall / kernel_ms, 3) if kernel_ms else None,
                                 "top_kernels_ms": kernels, "top_host_functions_own_ms": host}
        log(f"profile batch {batch}: wall {wall:.3f} ms, kernels {kernel_ms:.3f} ms")
        while engine.has_work():  # the few tokens left: the next batch starts alone
            engine.step()
    return out


STEPS = {"prefill": step_prefill, "profile": step_profile}
