"""Engine throughput and latency against llama.cpp's server and Hugging Face static batching,
on one Poisson workload, in one run.

`python -m benchmarks.engine [--requests 64 --rate 4 --seed 0 --static-batch 16] [--compile]
[--kv-cache-dtype bfloat16]` (the last two: the worker's flags of those names) builds a
seeded workload on SmolLM2-135M (prompts of 20-600 tokens of real text, outputs of 16-256
tokens, EOS ignored so every system generates exactly the requested lengths, Poisson
arrivals), replays the same arrival schedule through (a) our engine, (b) HF `generate` with
padded static batches, (c) llama.cpp's `llama-server` on the same model's Q4_1 GGUF
(benchmarks/engine_llamacpp_peer.py; built once, see benchmarks/llamacpp_build.py), and
prints one JSON
object as its last stdout line: output tokens/s, TTFT and inter-token latency p50/p99 for
each, engine/peer ratios, and the engine's achieved FLOP/s as a fraction of a measured fp32
GEMM peak. Progress goes to stderr. Timings on a shared 2-core machine are noisy: compare
the ratios measured side by side, not absolute numbers across runs.

GPU runs: `python -m benchmarks.engine --device cuda --model llama-3.2-1b` (or llama-3.2-3b)
runs a randomly initialised model of that architecture (benchmarks/engine_models.py; random
prompt ids, the same length and arrival distributions) in bf16 against HF static batching
(llama.cpp is skipped: its peer serves the bundled GGUF on CPU), and adds single-stream
decode tok/s as a fraction of the bandwidth limit and throughput at --concurrency requests
in flight (benchmarks/engine_decode.py). `--model tiny --requests 8` smoke-tests all of it
on CPU in seconds. The defaults (CPU, SmolLM2-135M) are the run described above.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import random
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from backends.engine import EngineConfig, SamplingParams  # noqa: E402
from backends.engine.core.llm_engine import LLMEngine  # noqa: E402
from backends.engine.model.models import model_dir  # noqa: E402
from backends.engine.model.device import KV_CACHE_DTYPES, resolve_device, resolve_dtype  # noqa: E402
from benchmarks.engine_decode import at_concurrency, copy_bandwidth, single_stream  # noqa: E402
from benchmarks.engine_llamacpp_peer import run_llamacpp  # noqa: E402
from benchmarks.engine_models import ARCHITECTURES, random_model, random_prompt  # noqa: E402
from benchmarks.engine_peers import run_hf_static, sleep_until  # noqa: E402
from measure.stats import percentile  # noqa: E402

MODEL = "smollm2-135m"
SENTENCES = [
    "The river rose slowly through the night, and by morning the lower fields were under water.",
    "Farmers moved their animals to the hills while the children carried sandbags to the old mill.",
    "A gateway decides which model should answer each request, weighing cost against quality.",
    "Cheap models handle simple questions well, but hard reasoning still needs a larger one.",
    "The library kept its oldest maps in a cold room, wrapped in paper and sorted by coastline.",
    "Every evening the baker wrote down how much flour was left and what sold before noon.",
    "Trains from the north arrived late all winter because snow kept closing the mountain pass.",
    "She tuned the violin twice before the concert, once in the hall and once backstage.",
    "Batching many requests together keeps the matrix units busy instead of waiting on memory.",
    "The committee met on Tuesdays to review the budget, the schedule, and the list of repairs.",
    "Rain in the desert is rare, yet when it comes the plain turns green within a single week.",
    "He learned to cook by watching his grandmother, who never measured anything at all.",
    "A cache that remembers shared prefixes saves the work of reading the same prompt twice.",
    "The ship's log recorded wind, speed, and heading every four hours for the entire voyage.",
    "Old bridges were built of stone because iron rusted and timber rotted in the damp valley.",
    "The museum opened a new wing for instruments that measured time, from sundials to clocks.",
    "Students compared the two translations line by line and argued about every choice of word.",
    "When the power failed, the hospital switched to its generators within a few seconds.",
    "Bees visit thousands of flowers a day and find their way home by the angle of the sun.",
    "The final report listed what worked, what failed, and what the team would try next year.",
]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def text_prompt(tokenizer):
    """Prompts of real text: the sentences shuffled per request, cut to the target length."""
    def make(rng, target: int) -> list[int]:
        ids: list[int] = []
        while len(ids) < target:
            order = SENTENCES[:]
            rng.shuffle(order)
            ids.extend(tokenizer(" ".join(order) + " ", add_special_tokens=False)["input_ids"])
        return ids[:target]
    return make


def build_workload(make_prompt, n: int, rate: float, seed: int):
    """Seeded prompts (make_prompt(rng, length)), output lengths and Poisson arrival offsets;
    the same lists feed every system."""
    rng = random.Random(seed)
    prompts, out_lens, arrivals, clock = [], [], [], 0.0
    for _ in range(n):
        prompts.append(make_prompt(rng, rng.randint(20, 600)))
        out_lens.append(rng.randint(16, 256))
        arrivals.append(clock)
        clock += rng.expovariate(rate)
    return prompts, out_lens, arrivals


def summarize(start: float, arrivals: list[float], times: list[list[float]], out_lens: list[int],
              stopped_at: float | None = None) -> dict:
    """A run cut off at `stopped_at` (the peer time limit) is summarized from the tokens it
    produced by then; a request with no token yet counts its wait so far as a TTFT lower bound."""
    produced = sum(len(t) for t in times)
    if not produced:
        return {"error": "no tokens produced"}
    end = stopped_at if stopped_at is not None else max(t[-1] for t in times if t)
    ttft = sorted((t[0] if t else end) - (start + a) for t, a in zip(times, arrivals) if t or start + a < end)
    itl = sorted(b - a for t in times for a, b in zip(t, t[1:]))
    summary = {"tokens_per_s": round(produced / (end - start), 2), "elapsed_s": round(end - start, 2),
               "ttft_p50_s": round(percentile(ttft, 50), 4), "ttft_p99_s": round(percentile(ttft, 99), 4),
               "itl_p50_s": round(percentile(itl, 50), 4), "itl_p99_s": round(percentile(itl, 99), 4)}
    done = sum(1 for t, n in zip(times, out_lens) if len(t) >= n)
    if done < len(out_lens):
        summary["partial"] = f"stopped at the time limit: {done}/{len(out_lens)} requests complete, {produced} tokens"
    return summary


def gemm_peak_flops(device: torch.device, dtype: torch.dtype, size: int = 2048, repeats: int = 5) -> float:
    a, b = torch.randn(size, size, device=device, dtype=dtype), torch.randn(size, size, device=device, dtype=dtype)
    torch.mm(a, b)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    best = float("inf")
    for _ in range(repeats):
        sync()
        begin = time.perf_counter()
        torch.mm(a, b)
        sync()
        best = min(best, time.perf_counter() - begin)
    return 2 * size ** 3 / best


def build_engine(args, device: torch.device, dtype: torch.dtype) -> LLMEngine:
    config = EngineConfig(model=args.model, max_num_batched_tokens=args.max_num_batched_tokens,
                          max_num_seqs=args.max_num_seqs,
                          kv_cache_bytes=2 << 30, device=device.type, dtype=str(dtype).split(".")[-1],
                          cuda_graphs=args.cuda_graphs, padded_decode=args.padded_decode, compile_decode=args.compile, kv_cache_dtype=args.kv_cache_dtype)
    if args.model in ARCHITECTURES:
        return LLMEngine(config, model=random_model(args.model, device, dtype, args.seed))
    return LLMEngine(config)


def run_engine(args, engine, prompts, out_lens, arrivals):
    greedy = [SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True) for n in out_lens]
    engine.generate([prompts[0][::-1][:32]], SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True))
    engine.num_computed_tokens = engine.num_generated_tokens = 0  # warm-up not counted
    n = len(prompts)
    times: list[list[float]] = [[] for _ in range(n)]
    index_of: dict[int, int] = {}
    finished = next_arrival = 0
    busy = 0.0
    profiler = cProfile.Profile() if args.profile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    while finished < n:
        now = time.perf_counter()
        while next_arrival < n and start + arrivals[next_arrival] <= now:
            seq = engine.add_request(prompts[next_arrival], greedy[next_arrival])
            index_of[seq.seq_id] = next_arrival
            next_arrival += 1
        if not engine.has_work():
            sleep_until(start + arrivals[next_arrival])
            continue
        outputs = engine.step()
        stamp = time.perf_counter()
        busy += stamp - now
        for seq, _ in outputs:
            times[index_of[seq.seq_id]].append(stamp)
            if seq.is_finished:
                finished += 1
                if finished % 16 == 0:
                    log(f"engine: {finished}/{n} requests finished at {stamp - start:.1f}s")
    if profiler:
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(15)
    # matmul FLOPs: every computed token goes through the non-embedding weights, only sampled
    # tokens through the LM head (logits_to_keep); attention score FLOPs are not counted
    head = engine.model.get_output_embeddings().weight.numel()
    body = sum(p.numel() for p in engine.model.parameters()) - engine.model.get_input_embeddings().weight.numel()
    flops = 2 * body * engine.num_computed_tokens + 2 * head * engine.num_generated_tokens
    return start, times, {"computed_tokens": engine.num_computed_tokens, "flops": flops, "busy_s": busy}


def ratio(engine: dict, peer: dict) -> dict:
    if "error" in engine or "error" in peer:
        return {"error": "a run failed"}
    return {"tokens_per_s": round(engine["tokens_per_s"] / peer["tokens_per_s"], 3),
            "ttft_p99_s": round(engine["ttft_p99_s"] / peer["ttft_p99_s"], 3),
            "itl_p99_s": round(engine["itl_p99_s"] / peer["itl_p99_s"], 3)}


def run_peer(name: str, runner, arrivals, out_lens) -> dict:
    log(f"running {name}")
    gc.collect()
    try:
        start, times, stopped_at = runner()
    except Exception as error:  # a peer that cannot run is reported, not fatal
        log(f"{name} failed: {error!r}")
        return {"error": repr(error)}
    return summarize(start, arrivals, times, out_lens, stopped_at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=MODEL, choices=[MODEL, *ARCHITECTURES],
                        help="the bundled SmolLM2, or a randomly initialised architecture (engine_models.py)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"],
                        help="default: bfloat16 on CUDA, float32 on CPU")
    parser.add_argument("--cuda-graphs", action=argparse.BooleanOptionalAction, default=None,
                        help="decode CUDA graphs (default: on for CUDA)")
    parser.add_argument("--padded-decode", action="store_true", help="CPU: the worker's --padded-decode")
    parser.add_argument("--compile", action="store_true", help="compiled decode steps on CPU (the worker's --compile)")
    parser.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto", help="the worker's --kv-cache-dtype")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight for the throughput run")
    parser.add_argument("--single-stream-tokens", type=int, default=128)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--rate", type=float, default=4.0, help="Poisson arrival rate, requests/s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--static-batch", type=int, default=16)
    parser.add_argument("--max-num-batched-tokens", type=int, help="default: the engine's for the device")
    parser.add_argument("--max-num-seqs", type=int, help="default: the engine's for the device")
    parser.add_argument("--peer-limit", type=float, default=240.0,
                        help="seconds each peer may run; a peer cut off is summarized from what it produced")
    parser.add_argument("--skip-peers", action="store_true", help="engine only")
    parser.add_argument("--profile", action="store_true", help="cProfile the engine loop (stderr)")
    args = parser.parse_args()
    began = time.perf_counter()
    device = resolve_device(args.device)
    dtype = resolve_dtype(args.dtype, device)
    if args.model in ARCHITECTURES:
        vocab = ARCHITECTURES[args.model]["vocab_size"]
        make_prompt, pad_id, peer_model = (lambda rng, n: random_prompt(rng, vocab, n)), 0, \
            (lambda: random_model(args.model, device, dtype, args.seed, "sdpa"))
    else:
        path = model_dir(MODEL)
        tokenizer = AutoTokenizer.from_pretrained(path)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        make_prompt, peer_model = text_prompt(tokenizer), (lambda: path)
    prompts, out_lens, arrivals = build_workload(make_prompt, args.requests, args.rate, args.seed)
    log(f"workload: {len(prompts)} requests over {arrivals[-1]:.1f}s, {sum(map(len, prompts))} prompt "
        f"and {sum(out_lens)} output tokens on {device} ({dtype})")
    peak = gemm_peak_flops(device, dtype)
    log(f"{dtype} GEMM peak: {peak / 1e9:.1f} GFLOP/s")

    log("running engine")
    engine = build_engine(args, device, dtype)
    start, times, work = run_engine(args, engine, prompts, out_lens, arrivals)
    result: dict = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                    "engine": summarize(start, arrivals, times, out_lens)}
    wall = result["engine"].get("elapsed_s", float("nan"))
    log(f"engine: {result['engine']}")
    # measured again after the run, and the higher taken: a neighbour's burst during one
    # measurement once halved the peak (103 against 182 GFLOP/s) and doubled the fraction
    peak = max(peak, gemm_peak_flops(device, dtype))
    result["single_stream"] = single_stream(engine, prompts[0], args.single_stream_tokens, copy_bandwidth(device))
    log(f"single stream: {result['single_stream']}")
    # a workload of its own (next seed), so no prompt is a prefix-cache hit from the run above
    more_prompts, more_lens, _ = build_workload(make_prompt, args.concurrency, args.rate, args.seed + 1)
    result["at_concurrency"] = at_concurrency(engine, more_prompts, more_lens, args.concurrency)
    log(f"at concurrency: {result['at_concurrency']}")
    del engine
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the peer needs the memory the engine's KV pool held
    if not args.skip_peers:
        result["hf_static"] = run_peer("hf_static", lambda: run_hf_static(
            peer_model(), prompts, out_lens, arrivals, args.static_batch, pad_id, log, args.peer_limit),
            arrivals, out_lens)
        log(f"hf_static: {result['hf_static']}")
        result["ratio_vs_hf_static"] = ratio(result["engine"], result["hf_static"])
        if args.model == MODEL and device.type == "cpu":  # llama.cpp serves the bundled GGUF on CPU only
            result["llamacpp"] = run_peer("llamacpp", lambda: run_llamacpp(MODEL, prompts, out_lens, arrivals, log,
                                                                           args.peer_limit), arrivals, out_lens)
            log(f"llamacpp: {result['llamacpp']}")
            result["ratio_vs_llamacpp"] = ratio(result["engine"], result["llamacpp"])
    result["gemm_peak_fraction"] = round(work["flops"] / work["busy_s"] / peak, 4)
    result["gemm_peak_fraction_wall"] = round(work["flops"] / wall / peak, 4)
    result["gemm_peak_gflops"] = round(peak / 1e9, 1)
    result["engine_achieved_gflops"] = round(work["flops"] / work["busy_s"] / 1e9, 1)
    result["workload"] = {"model": args.model, "dtype": str(dtype), "requests": args.requests, "rate_per_s": args.rate, "seed": args.seed,
                          "prompt_tokens": sum(map(len, prompts)), "output_tokens": sum(out_lens),
                          "static_batch": args.static_batch, "compile": args.compile, "kv_cache_dtype": args.kv_cache_dtype,
                          "max_num_batched_tokens": args.max_num_batched_tokens, "threads": torch.get_num_threads()}
    result["notes"] = ("TTFT from scheduled arrival; tokens_per_s = output tokens / (last token - first arrival); "
                       "gemm_peak_fraction = engine matmul FLOPs (non-embedding weights per computed token + LM head "
                       "per sampled token, attention excluded) / time inside engine.step() / best fp32 2048^3 torch.mm; "
                       "_wall uses the engine's whole elapsed time; llamacpp times each streamed token at the client (HTTP included, unlike the in-process runs); a peer cut off at --peer-limit is summarized from what it produced by then (see its partial field)")
    result["total_runtime_s"] = round(time.perf_counter() - began, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
