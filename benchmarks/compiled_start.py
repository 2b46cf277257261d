"""`python -m benchmarks.compiled_start [--cache-dir DIR] [--no-weight-prepack]`: how long an int4
worker's engine takes to start on the CPU's default plan (compiled decode steps), how many of its
graphs inductor's cache served, and its decode speed with 16 streams.

Run it twice with one --cache-dir to see a restart: the first run fills the cache (a new directory is
a cold start), the second reads it. --no-weight-prepack compiles without oneDNN's packed weights, the
alternative docs/engine-cpu.md weighs (both graphs cacheable, batched steps slower). Last line: one
JSON object."""
from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", help="inductor's cache (default: the worker's, ~/.cache/tiergate/inductor)")
    parser.add_argument("--no-weight-prepack", dest="weight_prepack", action="store_false",
                        help="no oneDNN weight packing in the compiled graphs")
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=48)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.cache_dir:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = args.cache_dir

    import torch
    from torch._dynamo.utils import counters

    from backends import worker
    from backends.engine import EngineConfig, SamplingParams
    from backends.engine.core.llm_engine import LLMEngine
    from benchmarks.streaming_load import synthetic_prompts

    torch._inductor.config.cpp.weight_prepack = args.weight_prepack  # read when the graphs compile
    flags = worker.build_parser().parse_args(["--model", "smollm2-135m", "--quantization", "int4", "--device", "cpu"])
    config = EngineConfig(model="smollm2-135m", quantization="int4", device="cpu", **worker.plan_settings(flags))
    print(f"building the engine (inductor cache: {os.environ['TORCHINDUCTOR_CACHE_DIR']}) ...", flush=True)
    began = time.perf_counter()
    engine = LLMEngine(config)
    start_s = time.perf_counter() - began
    cache = {key: counters["inductor"][f"fxgraph_cache_{key}"] for key in ("hit", "miss", "bypass")}
    prompts = [engine.tokenizer.encode(text) for text in synthetic_prompts(args.streams, 20, 40, seed=0)]
    params = SamplingParams(temperature=0.0, max_tokens=args.tokens, ignore_eos=True)
    engine.generate(prompts[:4], params)  # warm
    best = float("inf")
    for round_ in range(3):
        began = time.perf_counter()
        engine.generate(prompts, params)
        best = min(best, time.perf_counter() - began)
        print(f"round {round_ + 1}/3: {args.streams * args.tokens / best:.0f} tok/s best so far", flush=True)
    print(json.dumps({"weight_prepack": args.weight_prepack, "start_s": round(start_s, 1), "graph_cache": cache,
                      "streams": args.streams, "tokens_per_s": round(args.streams * args.tokens / best, 1)}))


if __name__ == "__main__":
    main()
