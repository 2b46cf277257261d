"""The steps of `benchmarks.gpu_check`, each run in a process of its own (so a step past its time
box can be killed, and each starts with the whole GPU): `python -m benchmarks.gpu_check --step
NAME` calls one of STEPS and prints its dict as the last stdout line.

The measurements are benchmarks.engine's own (benchmarks/engine_decode.py: single-stream decode
against the bandwidth limit, throughput at N in flight; engine.build_engine; engine_peers.py's
peers) on random models of real shapes (benchmarks/engine_models.py), and the HTTP client of
benchmarks/streaming_load.py against a real worker process.
"""
from __future__ import annotations

import asyncio
import gc
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import torch

from backends.engine import EngineConfig, SamplingParams
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.model.models import model_dir
from backends.engine.quant.int4_kernels import RowKernel, RowTable
from backends.engine.quant.quantize import Int4Linear, Int8Linear
from benchmarks.engine import build_engine, log
from benchmarks.engine_decode import at_concurrency, copy_bandwidth, single_stream
from benchmarks.engine_models import ARCHITECTURES, random_int4_model, random_model, random_prompt
from benchmarks.engine_peers import run_hf_continuous, run_hf_static
from benchmarks.streaming_load import run_closed_loop
from launcher.processes import free_port, stop_processes, wait_healthy
from measure.int4_table import cuda_timer, int4_kernel_table, projection_shapes
from measure.speculation import always_agree

ROOT = Path(__file__).parents[1]
CUDA = torch.device("cuda")
BF16 = torch.bfloat16
PROMPT_TOKENS, OUTPUT_TOKENS = 500, 128
# prompt (and, for the HTTP worker, output) ids stay inside SmolLM2's vocabulary, whose tokenizer
# the saved random model borrows
TOKENIZER_VOCAB = 49152
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
# the in-process engine and the HTTP worker run with the same limits, so their ratio is like for like
ENGINE_FLAGS = {"max_num_seqs": 256, "max_num_batched_tokens": 4096}
WARM_TOKENS = 32  # decode tokens a single stream runs before it is timed (engine_decode.single_stream)
SPEC_BATCHES, SPEC_DRAFT_TOKENS, SPEC_PROMPT_TOKENS = (1, 16), 4, 128  # step_spec, with OUTPUT_TOKENS each
SHAPES = {"1b": "llama-3.2-1b", "3b": "llama-3.2-3b", "70b": "llama-3.1-70b"}  # engine_models.ARCHITECTURES


def workload(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [random_prompt(rng, TOKENIZER_VOCAB, PROMPT_TOKENS) for _ in range(n)]


def _free() -> None:
    gc.collect()
    torch.cuda.empty_cache()


def engine_1b(seed: int) -> LLMEngine:
    args = SimpleNamespace(model=SHAPES["1b"], cuda_graphs=None, compile=False, kv_cache_dtype="auto", seed=seed,
                           **ENGINE_FLAGS)
    return build_engine(args, CUDA, BF16)


def warm(engine: LLMEngine, seed: int) -> None:
    """One short request through a new engine: its first prefill and decode steps pay the lazy setup."""
    engine.generate([workload(1, seed + 9)[0][:32]], SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True))


def step_engine(seed: int, out_dir: Path) -> dict:
    """Random Llama-3.2-1B in bf16: single stream against the bandwidth limit (after warm-up), then
    64 and 256 requests in flight (each set its own prompts: no prefix-cache hits between them)."""
    engine = engine_1b(seed)
    warm(engine, seed)
    out = {"single_stream": single_stream(engine, workload(1, seed + 7)[0], OUTPUT_TOKENS, copy_bandwidth(CUDA),
                                          WARM_TOKENS)}
    log(f"engine single stream: {out['single_stream']}")
    for n, prompts in ((64, workload(64, seed)), (256, workload(256, seed + 1))):
        out[f"at_{n}"] = at_concurrency(engine, prompts, [OUTPUT_TOKENS] * n, n)
        log(f"engine at {n}: {out[f'at_{n}']}")
    out["gpu_peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return out


def step_hf(seed: int, out_dir: Path) -> dict:
    """transformers' continuous batching on the 256 requests of step_engine; the static-batching
    peer briefly, to show it runs on CUDA."""
    model = random_model(SHAPES["1b"], CUDA, BF16, seed, "sdpa")
    prompts = workload(256, seed + 1)
    out = {"static": _static(model, prompts[:16])}
    log(f"hf static: {out['static']}")
    out["continuous"] = run_hf_continuous(model, prompts, OUTPUT_TOKENS)
    log(f"hf continuous: {out['continuous']}")
    return out


def _static(model, prompts: list[list[int]]) -> dict:
    start, times, _ = run_hf_static(model, prompts, [32] * len(prompts), [0.0] * len(prompts), len(prompts), 0,
                                    log, 60.0)
    produced = sum(len(t) for t in times)
    return {"tokens_per_s": round(produced / (max(t[-1] for t in times if t) - start), 2), "output_tokens": produced}


def _save_random_1b(folder: Path, seed: int) -> None:
    """The random 1B with SmolLM2's tokenizer; head rows past that vocabulary zeroed, so greedy
    decoding (random logits of the others reach well above 0) only picks ids the tokenizer has."""
    model = random_model(SHAPES["1b"], CUDA, BF16, seed)
    with torch.no_grad():
        model.get_output_embeddings().weight[TOKENIZER_VOCAB:] = 0
    model.save_pretrained(folder)
    tokenizer = model_dir("smollm2-135m")
    for name in TOKENIZER_FILES:
        if (tokenizer / name).exists():
            shutil.copy(tokenizer / name, folder / name)
    del model
    _free()


def step_http(seed: int, out_dir: Path) -> dict:
    """A worker process on the saved random 1B: 1 stream, then 64 streams of the 64 prompts of
    step_engine (token ids), streamed /v1/completions."""
    if not (model_dir("smollm2-135m") / "tokenizer.json").exists():
        return {"skipped": f"no SmolLM2 tokenizer at {model_dir('smollm2-135m')} (docs/gpu.md)"}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "llama-3.2-1b-random"
        began = time.perf_counter()
        _save_random_1b(folder, seed)
        out: dict = {"save_s": round(time.perf_counter() - began, 1)}
        port = free_port()
        flags = [f"--{k.replace('_', '-')}={v}" for k, v in ENGINE_FLAGS.items()]
        cmd = [sys.executable, "-m", "backends.worker", "--model", str(folder), "--served-name", "random-1b",
               "--device", CUDA.type, "--port", str(port), *flags]
        with open(Path(tmp) / "worker.log", "wb") as worker_log:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=worker_log, stderr=subprocess.STDOUT)
            try:
                began = time.perf_counter()
                if not wait_healthy(f"http://127.0.0.1:{port}", proc, 180):
                    tail = (Path(tmp) / "worker.log").read_text(errors="replace")[-1500:]
                    return {**out, "error": f"worker did not start: {tail}"}
                out["start_s"] = round(time.perf_counter() - began, 1)
                out.update(_streams(f"http://127.0.0.1:{port}", seed))
            finally:
                stop_processes([proc], timeout_s=20)
    return out


def _streams(url: str, seed: int) -> dict:
    prompts = workload(64, seed)
    asyncio.run(run_closed_loop(url, "random-1b", [(prompts[0][:32], 8)], 1))  # warm-up
    out = {"streams_1": asyncio.run(run_closed_loop(url, "random-1b", [(p, OUTPUT_TOKENS) for p in prompts[:2]], 1))}
    log(f"http 1 stream: {out['streams_1']}")
    out["streams_64"] = asyncio.run(run_closed_loop(url, "random-1b", [(p, OUTPUT_TOKENS) for p in prompts], 64))
    log(f"http 64 streams: {out['streams_64']}")
    return out


def _kernel_name(layer: Int4Linear | Int8Linear) -> str:
    if isinstance(layer, Int8Linear):
        return f"int8 {layer.kernel}"
    return f"int4 {layer.kernel if layer.rows is None else layer.rows.table.describe()}"


def quantized_kernels(model: torch.nn.Module) -> dict[str, int]:
    """How many int4 / int8 layers run each kernel, or each row table (int4 on CUDA), e.g.
    {"int4 tinygemm<=64 dequant": 196, "int8 triton": 1}."""
    return dict(Counter(_kernel_name(m) for m in model.modules() if isinstance(m, (Int4Linear, Int8Linear))))


def step_int4_3b(seed: int, out_dir: Path) -> dict:
    """Random Llama-3.2-3B in bf16, then the same weights quantized to int4 by the engine as the
    worker's --quantization int4 does (its default kernels and row table, named in "kernels"):
    single stream (after warm-up) and 64 in flight for each."""
    out = {}
    for name, quantization in (("bf16", None), ("int4", "int4")):
        model = random_model(SHAPES["3b"], CUDA, BF16, seed)
        engine = LLMEngine(EngineConfig(model=SHAPES["3b"], device=CUDA.type, quantization=quantization), model=model)
        warm(engine, seed)
        run = {"kernels": quantized_kernels(engine.model),
               "single_stream": single_stream(engine, workload(1, seed + 7)[0], 64, copy_bandwidth(CUDA), WARM_TOKENS),
               "at_64": at_concurrency(engine, workload(64, seed), [64] * 64, 64)}
        out[name] = run
        log(f"3b {name}: {run}")
        del engine, model
        _free()
    return out


def step_70b(seed: int, out_dir: Path) -> dict:
    """Random Llama-3.1-70B in int4 (groups of 32), built layer by layer on the GPU, then one
    short generation through the engine. On tinygemm alone: a second packing of its codes (for
    the dequantized prefill path) would take another 35 GiB, more than an 80 GiB GPU has left."""
    began = time.perf_counter()
    model = random_int4_model(SHAPES["70b"], CUDA, BF16, 32, seed, table=RowTable.only(RowKernel.TINYGEMM))
    torch.cuda.synchronize()
    out = {"build_s": round(time.perf_counter() - began, 1),
           "weights_gib": round(torch.cuda.memory_allocated() / 2**30, 2),
           "build_peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "kernels": quantized_kernels(model)}
    log(f"70b built: {out}")
    engine = LLMEngine(EngineConfig(model=SHAPES["70b"], device=CUDA.type, cuda_graphs=False, max_num_seqs=4),
                       model=model)
    began = time.perf_counter()
    [ids] = engine.generate([workload(1, seed)[0][:32]], SamplingParams(max_tokens=16, temperature=0.0,
                                                                          ignore_eos=True))
    elapsed = time.perf_counter() - began
    free, total = torch.cuda.mem_get_info()
    out.update({"generated_tokens": len(ids), "generate_s": round(elapsed, 2), "serves": len(ids) == 16,
                "gpu_used_gib": round((total - free) / 2**30, 2), "gpu_total_gib": round(total / 2**30, 2),
                "kv_blocks": engine.runner.num_blocks})
    return out


def step_int4_table(seed: int, out_dir: Path) -> dict:
    """Each int4 candidate kernel against a bf16 matmul at 1 to 4,096 rows, over one decoder layer of
    the 3B and of the 70B (measure/int4_table.py); the table it chooses goes to int4_row_table.json,
    which TIERGATE_INT4_TABLE can point at."""
    shapes = {SHAPES[size]: projection_shapes(*(ARCHITECTURES[SHAPES[size]][key] for key in (
        "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim")))
        for size in ("3b", "70b")}
    out = int4_kernel_table(shapes, cuda_timer, CUDA, seed=seed)
    table_file = out_dir / "int4_row_table.json"
    table_file.write_text(json.dumps({"int4_row_table": out["int4_row_table"]}) + "\n")
    log(f"int4 row table: {out['int4_row_table']} (written to {table_file})")
    return {**out, "file": str(table_file)}


def step_spec(seed: int, out_dir: Path) -> dict:
    """Random Llama-3.2-1B in bf16, greedy, with a draft that always agrees (measure/speculation.py):
    at batch 1 and 16, decode with 4 drafts per sequence against plain decode (each after a warm-up
    run): time per token and per step, the acceptance rate, and whether every token is the same."""
    model = random_model(SHAPES["1b"], CUDA, BF16, seed)

    def build(**changes) -> LLMEngine:  # one model under both engines, each with its own KV pool
        return LLMEngine(EngineConfig(model=SHAPES["1b"], device=CUDA.type, dtype="bfloat16", kv_cache_bytes=2 << 30,
                                      max_num_seqs=max(SPEC_BATCHES), **changes), model=model)

    prompts = [prompt[:SPEC_PROMPT_TOKENS] for prompt in workload(max(SPEC_BATCHES), seed + 17)]
    out = always_agree(build, prompts, SPEC_BATCHES, SPEC_DRAFT_TOKENS, OUTPUT_TOKENS, torch.cuda.synchronize)
    for batch in SPEC_BATCHES:
        log(f"spec batch {batch}: {out[f'batch_{batch}']}")
    return out


STEPS = {"engine": step_engine, "spec": step_spec, "int4_table": step_int4_table, "int4_3b": step_int4_3b, "70b": step_70b,
         "http": step_http, "hf": step_hf}  # and benchmarks/gpu_check_profile.py's
