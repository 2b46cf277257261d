"""`python -m benchmarks.start_phases [--threads 1]`: where `make run`'s int4 worker spends its start, phase by
phase, from the process's start to its first streamed token: wall and CPU seconds of each phase (CPU counts
every thread of the process, so the shared machine's other jobs do not inflate it).

The worker runs in this process (`backends.worker.main` on a thread of its own), with the engine's start-up
steps wrapped in timers; its cache is `$TIERGATE_CACHE` as it is, so a second run times a warm restart.
A phase's time is its own calls' total; what no phase covers is `other`. Last line: one JSON object."""
from __future__ import annotations

import os
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def since_process_start() -> float:
    """Wall seconds since this process was started (the kernel's start time, before Python's own start-up)."""
    with open("/proc/self/stat") as stat:
        started = int(stat.read().rsplit(")", 1)[1].split()[19]) / CLOCK_TICKS
    return time.clock_gettime(time.CLOCK_BOOTTIME) - started


BORN_S = time.perf_counter() - since_process_start()  # perf_counter's reading at the process's start
PHASES: dict[str, list[float]] = {}  # phase -> [wall s, cpu s]


def add(phase: str, wall: float, cpu: float) -> None:
    found = PHASES.setdefault(phase, [0.0, 0.0])
    found[0] += wall
    found[1] += cpu


class Stopwatch:
    """Times a with-block into `phase`."""

    def __init__(self, phase: str):
        self.phase = phase

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def __exit__(self, *exc):
        add(self.phase, time.perf_counter() - self.wall, time.process_time() - self.cpu)


with Stopwatch("import torch"):
    import torch  # noqa: F401
with Stopwatch("import the worker (aiohttp, transformers, engine)"):
    from backends import worker

import argparse  # noqa: E402
import json  # noqa: E402
import threading  # noqa: E402
import urllib.request  # noqa: E402
from functools import wraps  # noqa: E402

from benchmarks.compiled_start import stream_until_first_token  # noqa: E402
from launcher.processes import free_port  # noqa: E402

_depth = threading.local()  # phases nest (a decode step inside the warm-up): only the outermost counts


def timed(owner, name: str, phase: str) -> None:
    """Replace owner.name (a function or class) with one that adds its calls' time to `phase`."""
    original = getattr(owner, name)

    @wraps(original)
    def call(*args, **kwargs):
        if getattr(_depth, "inside", False):
            return original(*args, **kwargs)
        _depth.inside = True
        try:
            with Stopwatch(phase):
                return original(*args, **kwargs)
        finally:
            _depth.inside = False

    setattr(owner, name, call)


def instrument() -> None:
    """Timers on the start-up steps, where the engine's modules look them up."""
    from backends.engine.core import llm_engine
    from backends.engine.model import compiled_decode, model_runner
    from kernels import cpu_kernels

    timed(llm_engine, "load_tokenizer", "tokenizer")
    timed(llm_engine, "load_fitting", "weights: load (safetensors)")
    timed(llm_engine, "quantize_model", "weights: quantize and pack")
    timed(cpu_kernels, "available", "C++ kernels: build or load")
    timed(model_runner.ModelRunner, "_allocate_pool", "KV pool")
    timed(compiled_decode, "source_digest", "package key: sources")
    timed(compiled_decode, "tensors_digest", "package key: tensors")
    timed(compiled_decode.CompiledDecode, "_build", "packages: export and compile")
    timed(compiled_decode, "LoadedStep", "packages: load")
    timed(model_runner.ModelRunner, "dummy_decode", "warm-up decode steps")


def first_token(url: str, deadline_s: float) -> None:
    """Waits for /health, then streams one chat completion until its first content token."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5):
                break
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)
    add("HTTP server up (after the engine)", *mark_since("engine ready"))
    began = time.perf_counter(), time.process_time()
    stream_until_first_token(url)
    add("first request to its first token", time.perf_counter() - began[0], time.process_time() - began[1])


_marks: dict[str, tuple[float, float]] = {}


def mark_since(name: str) -> tuple[float, float]:
    wall, cpu = _marks[name]
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="the worker's --threads (make run gives 1 each)")
    parser.add_argument("--timeout-s", type=float, default=1800)
    args = parser.parse_args()
    instrument()
    original_build_app = worker.build_app

    def build_app(*a, **kw):
        app = original_build_app(*a, **kw)
        _marks["engine ready"] = time.perf_counter(), time.process_time()
        return app

    worker.build_app = build_app
    port = free_port()
    argv = ["--model", "smollm2-135m", "--quantization", "int4", "--device", "cpu", "--port", str(port),
            "--threads", str(args.threads)]
    threading.Thread(target=report, args=(f"http://127.0.0.1:{port}", args), daemon=True, name="probe").start()
    worker.main(argv)  # on the main thread, as aiohttp's signal handlers need; report() ends the process


def report(url: str, args: argparse.Namespace) -> None:
    try:
        first_token(url, args.timeout_s)
    except BaseException as error:  # the process must end either way
        print(f"no first token: {error!r}", flush=True)
        os._exit(1)
    total_wall, total_cpu = time.perf_counter() - BORN_S, time.process_time()
    covered = [sum(v[i] for v in PHASES.values()) for i in (0, 1)]
    add("other (interpreter start, config, app, gaps)", total_wall - covered[0], total_cpu - covered[1])
    for phase, (wall, cpu) in PHASES.items():
        print(f"{phase:48s} {wall:7.2f} s wall {cpu:7.2f} s cpu", flush=True)
    print(f"{'start to first token':48s} {total_wall:7.2f} s wall {total_cpu:7.2f} s cpu", flush=True)
    print(json.dumps({"threads": args.threads, "first_token_wall_s": round(total_wall, 2),
                      "first_token_cpu_s": round(total_cpu, 2),
                      "phases": {k: {"wall_s": round(w, 2), "cpu_s": round(c, 2)} for k, (w, c) in PHASES.items()}}),
          flush=True)
    os._exit(0)  # the worker's event loop has no stop of its own


if __name__ == "__main__":
    main()
