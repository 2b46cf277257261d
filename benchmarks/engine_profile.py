"""`python -m benchmarks.engine_profile [--quantization int4] [--steps 32]`: where one batch-1
decode step of SmolLM2 spends its time. Runs one ~300-token prompt through prefill, then times
`--steps` decode steps of the engine, then profiles the same number more with the torch
profiler and prints the top operators by self CPU time. Last line: one JSON object with ms per
step, the share of the step inside aten ops by family (linear kernels, attention, the rest) and
the remainder outside any op (Python: the HF model's modules, our step metadata, sampling)."""
from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from backends.engine import EngineConfig, SamplingParams  # noqa: E402
from backends.engine.model.device import KV_CACHE_DTYPES  # noqa: E402
from backends.engine.core.llm_engine import LLMEngine  # noqa: E402
from benchmarks.streaming_load import synthetic_prompts  # noqa: E402

FAMILIES = {  # aten op name fragments -> family
    "linear": ("addmm", "aten::mm", "matmul", "linear", "_weight_int4pack_mm", "_weight_int8pack_mm"),
    "attention": ("scaled_dot_product", "index_select", "index_copy", "softmax", "_flash_attention"),
}


def family(name: str) -> str:
    return next((f for f, keys in FAMILIES.items() if any(k in name for k in keys)), "other ops")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quantization", choices=["int8", "int4"])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--compile", action="store_true", help="compiled decode steps (the worker's --compile)")
    parser.add_argument("--batch", type=int, default=1, help="sequences decoding together")
    parser.add_argument("--int4-dense-prefill", action="store_true", help="the worker's --int4-dense-prefill")
    parser.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto", help="the worker's --kv-cache-dtype")
    parser.add_argument("--engine-thread", action="store_true",
                        help="time the steps on a second thread, as the worker's engine loop runs them "
                             "(run with and without OMP_WAIT_POLICY=ACTIVE to see libgomp's throttled spin)")
    args = parser.parse_args()
    # 64 MB of KV pool per sequence (~460 tokens of SmolLM2), so every sequence decodes in the batch
    engine = LLMEngine(EngineConfig(model="smollm2-135m", kv_cache_bytes=(64 << 20) * args.batch,
                                    quantization=args.quantization, compile_decode=args.compile,
                                    int4_dense_prefill=args.int4_dense_prefill, kv_cache_dtype=args.kv_cache_dtype))
    prompts = [engine.tokenizer.encode(text) for text in synthetic_prompts(args.batch, 300, 300, seed=0)]
    for prompt in prompts:
        engine.add_request(prompt, SamplingParams(max_tokens=3 * args.steps + 8, temperature=0.0, ignore_eos=True))
    began = time.perf_counter()
    while any(seq.num_computed_tokens < seq.num_prompt_tokens for seq in engine.scheduler.running + list(engine.scheduler.waiting)):
        engine.step()  # prefill
    prefill_tokens_per_s = sum(map(len, prompts)) / (time.perf_counter() - began)
    for _ in range(4):  # warm-up
        engine.step()
    def time_steps() -> float:
        began = time.perf_counter()
        for _ in range(args.steps):
            engine.step()
        return (time.perf_counter() - began) / args.steps * 1e3

    if args.engine_thread:
        with ThreadPoolExecutor(1) as pool:
            step_ms = pool.submit(time_steps).result()
    else:
        step_ms = time_steps()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        profiled_ms = time_steps()
    events = prof.key_averages()
    print(events.table(sort_by="self_cpu_time_total", row_limit=18))
    shares: dict[str, float] = {}
    for event in events:
        shares[family(event.key)] = shares.get(family(event.key), 0.0) + event.self_cpu_time_total / 1e3 / args.steps
    in_ops = sum(shares.values())
    result = {"quantization": args.quantization or "fp32", "compiled": args.compile, "batch": args.batch,
              "int4_dense_prefill": args.int4_dense_prefill, "kv_cache_dtype": args.kv_cache_dtype,
              "prefill_tokens_per_s": round(prefill_tokens_per_s, 1),
              "engine_thread": args.engine_thread, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
              "prompt_tokens": len(prompts[0]), "ms_per_step": round(step_ms, 2),
              "profiled_ms_per_step": round(profiled_ms, 2),
              "ms_per_step_in_ops": {k: round(v, 2) for k, v in sorted(shares.items())},
              "ms_per_step_outside_ops": round(profiled_ms - in_ops, 2), "threads": torch.get_num_threads(),
              "load_average": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
