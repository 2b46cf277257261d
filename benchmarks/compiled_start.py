"""`python -m benchmarks.compiled_start [--restarts N] [--against DIR]`: how long `make run`'s int4 worker
takes from its start to its first token, started cold (no compiled decode steps kept) and then
restarted N times (what the first start kept is loaded); with --against, another checkout's worker
(the code before a change) starts the same way, the two taking turns. Then the decode speed of the
compiled plan in process: 16 streams of 48 tokens, best of 3 rounds (--no-decode skips it; --no-starts
times the decode alone, on the packages the machine's cache holds; --clock cpu counts tokens per
CPU-second of the process on --threads threads, which a loaded machine disturbs less than wall time).

Each checkout starts from an empty cache of its own (compiled steps, inductor's cache) that shares
only the prepared models and the built C++ kernels. Last line: one JSON object."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from launcher.processes import free_port, stop_processes, wait_healthy

REPO = Path(__file__).resolve().parents[1]
WORKER_FLAGS = ["--model", "smollm2-135m", "--quantization", "int4", "--device", "cpu"]
SHARED = ("models", "extensions")  # what a cold start may reuse: prepared weights, the built C++ kernels


def cold_cache(root: Path) -> Path:
    """An empty cache folder that sees the machine's prepared models and built kernels."""
    folder = Path(tempfile.mkdtemp(prefix="start-bench-", dir=root))
    for name in SHARED:
        (folder / name).symlink_to(root / name, target_is_directory=True)
    return folder


def first_token(checkout: Path, cache: Path, threads: int, log: Path) -> float:
    """Seconds from the worker's start to the first token of a streamed chat completion."""
    port = free_port()
    env = {**os.environ, "TIERGATE_CACHE": str(cache), "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
           "PYTHONPATH": str(checkout)}
    env.pop("TIERGATE_WORKER_KEY", None)  # a loopback worker without a key, as a test stack's
    began = time.perf_counter()
    with open(log, "a") as out:
        proc = subprocess.Popen([sys.executable, "-m", "backends.worker", *WORKER_FLAGS, "--port", str(port),
                                 "--threads", str(threads)], cwd=checkout, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        if not wait_healthy(url, proc, 1800):
            raise RuntimeError(f"the worker in {checkout} did not start: see {log}")
        stream_until_first_token(url)
        return time.perf_counter() - began
    finally:
        stop_processes([proc])


def restarts(checkouts: dict[str, Path], count: int, threads: int, root: Path) -> dict:
    caches = {name: cold_cache(root) for name in checkouts}
    found: dict[str, dict] = {name: {"cold_s": None, "restart_s": []} for name in checkouts}
    try:
        for round_ in range(count + 1):
            for name, checkout in checkouts.items():
                seconds = round(first_token(checkout, caches[name], threads, caches[name] / "worker.log"), 1)
                kind = "cold start" if round_ == 0 else f"restart {round_}"
                print(f"{name}: {kind} to first token {seconds} s", flush=True)
                if round_ == 0:
                    found[name]["cold_s"] = seconds
                else:
                    found[name]["restart_s"].append(seconds)
    finally:
        for cache in caches.values():
            shutil.rmtree(cache, ignore_errors=True)
    return found


def decode_speed(streams: int, tokens: int, clock=time.perf_counter) -> float:
    """Tokens per second of `clock` of the compiled plan over `streams` greedy streams, best of 3 rounds,
    in process."""
    from backends import worker
    from backends.engine import EngineConfig, SamplingParams
    from backends.engine.core.llm_engine import LLMEngine
    from benchmarks.streaming_load import synthetic_prompts

    flags = worker.build_parser().parse_args(WORKER_FLAGS)
    engine = LLMEngine(EngineConfig(model="smollm2-135m", quantization="int4", device="cpu",
                                    **worker.plan_settings(flags)))
    prompts = [engine.tokenizer.encode(text) for text in synthetic_prompts(streams, 20, 40, seed=0)]
    params = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True)
    engine.generate(prompts[:4], params)  # warm
    best = float("inf")
    for round_ in range(3):
        began = clock()
        engine.generate(prompts, params)
        best = min(best, clock() - began)
        print(f"round {round_ + 1}/3: {streams * tokens / best:.0f} tok/s best so far", flush=True)
    return round(streams * tokens / best, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--restarts", type=int, default=2, help="warm restarts after the cold start")
    parser.add_argument("--against", type=Path, help="another checkout, started in turn with this one")
    parser.add_argument("--threads", type=int, default=1,
                        help="the worker's --threads (make run's four workers on 2 cores get 1 each)")
    parser.add_argument("--no-decode", dest="decode", action="store_false", help="skip the decode speed")
    parser.add_argument("--no-starts", dest="starts", action="store_false", help="only the decode speed")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="the decode speed's clock")
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=48)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from backends.engine.model.models import cache_root

    checkouts = {"this": REPO, **({"against": args.against.resolve()} if args.against else {})}
    result: dict = {"threads": args.threads}
    if args.starts:
        result["starts"] = restarts(checkouts, args.restarts, args.threads, cache_root())
    if args.decode:
        if args.clock == "cpu":
            torch.set_num_threads(args.threads)
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        result.update(streams=args.streams, clock=args.clock,
                      tokens_per_s=decode_speed(args.streams, args.tokens, clock))
    print(json.dumps(result))


if __name__ == "__main__":
    main()


def stream_until_first_token(url: str) -> None:
    """Stream one short chat from the worker at `url` and return at its first content token."""
    body = json.dumps({"model": "smollm2-135m", "stream": True, "max_tokens": 4,
                       "messages": [{"role": "user", "content": "Say hello."}]}).encode()
    request = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        for line in response:
            if line.startswith(b"data: {") and b'"content"' in line:
                return
    raise RuntimeError("the stream ended without a token")
