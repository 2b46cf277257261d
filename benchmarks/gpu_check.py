"""`python -m benchmarks.gpu_check` (`make gpu-check`): the whole CUDA path of the engine on one GPU
machine, under 8 minutes, one JSON object as the last stdout line.

Steps, in order, each in a process of its own with a time box (benchmarks/gpu_check_steps.py,
benchmarks/gpu_check_profile.py): the CUDA tests compiled for the GPU (pytest); random Llama-3.2-1B
in bf16: single-stream decode (after warm-up) against the bandwidth limit and throughput at 64 and
256 requests in flight; its prefill rate on 64 x 500-token prompts; a decode-step profile (wall
against GPU kernel time, top kernels and host functions, written as files); speculative decoding
with a draft that always agrees at batch 1 and 16 (the verification's cost per token, greedy
equality with and without drafts); each int4 kernel
against bf16 per row count (the table the int4 chooser can load, written as a file);
Llama-3.2-3B int4 against bf16; a random int4 Llama-3.1-70B built layer by layer and one short
generation; a worker over HTTP at 1 and 64 streams; transformers' continuous batching on the same
256 requests (and the HF static-batching peer briefly). `--only STEP[,STEP]` runs some of them.
A step that cannot run (no CUDA, no time left, a failure) is reported with the reason. `goals`
holds the issue's targets with the values measured. Progress goes to stderr; the JSON and the
steps' files go to `--out` too. docs/gpu.md says what to bring to a machine without a registry.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).parents[1]
BUDGET_S = 470  # the whole run's limit, under the 8 minutes
RESERVE_S = 5  # kept for the JSON after the last step
# seconds each step may take at most (and less when the budget runs short)
# (in the order they run: the comparison with transformers last, the first to give way when time runs short)
TIME_BOX_S = {"tests": 150, "engine": 110, "prefill": 60, "profile": 60, "spec": 45, "int4_table": 90, "int4_3b": 100,
              "70b": 150, "http": 120, "hf": 90}
OUT = ROOT / "gpu-check-out"  # the JSON and the steps' files (profiles, the int4 table)
# the gpu-marked tests live in these folders: collecting all of tests/ would import what such a
# machine lacks (the browser tests' Playwright, ...)
GPU_MARKED = ["tests/kernels", "tests/backends"]
# the Triton kernels compiled for the GPU, and the engine's device paths (the CPU kernels' tests stay out)
CUDA_TESTS = [*sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests/kernels").glob("test_triton_*.py")),
              "tests/backends/engine/model/test_cuda_graphs.py", "tests/backends/engine/model/test_device.py"]


def log(message: str) -> None:
    print(f"gpu_check: {message}", file=sys.stderr, flush=True)


def _run(cmd: list[str], limit_s: float, **kwargs) -> subprocess.CompletedProcess | None:
    """`cmd` in its own process group, killed whole (a worker it started included) past limit_s."""
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, text=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _junit_counts(path: Path) -> dict:
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    if not path.exists():
        return counts
    for suite in ET.parse(path).getroot().iter("testsuite"):
        total, failed, errors, skipped = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
        counts["failed"] += failed
        counts["errors"] += errors
        counts["skipped"] += skipped
        counts["passed"] += total - failed - errors - skipped
    return counts


def step_tests(limit_s: float) -> dict:
    """`pytest -m gpu` over GPU_MARKED, then the rest of CUDA_TESTS (not gpu-marked: no test twice)."""
    began, totals = time.perf_counter(), {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (marker, paths) in enumerate((("gpu", GPU_MARKED), ("not gpu", CUDA_TESTS))):
            left = limit_s - (time.perf_counter() - began)
            report = Path(tmp) / f"junit-{i}.xml"
            done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker,
                         f"--junitxml={report}", *paths], left, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if done is None:
                return {"skipped": f"time box: pytest -m '{marker}' still running after {limit_s:.0f} s", **totals}
            for key, value in _junit_counts(report).items():
                totals[key] += value
            if done.returncode not in (0, 1, 5):  # 1: tests failed, 5: none collected; else pytest itself broke
                totals["error"] = done.stdout[-1500:]
    return {**totals, "seconds": round(time.perf_counter() - began, 1)}


def run_step(name: str, limit_s: float, seed: int, out: Path) -> dict:
    if name == "tests":
        return step_tests(limit_s)
    done = _run([sys.executable, "-m", "benchmarks.gpu_check", "--step", name, "--seed", str(seed), "--out", str(out)],
                limit_s, stdout=subprocess.PIPE)  # stderr (progress) passes through
    if done is None:
        return {"skipped": f"time box: still running after {limit_s:.0f} s"}
    lines = done.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": f"exit {done.returncode}, no JSON line", "stdout_tail": done.stdout[-500:]}


def _get(steps: dict, *path):
    value = steps
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _ratio(a, b):
    return round(a / b, 3) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def goals(steps: dict) -> dict:
    """The issue's targets: {name: {target, value, met}}; met is None where the value is unknown.
    A target is a floor, except those marked "at most" (the step's wall time against its kernels')."""
    at64 = _get(steps, "engine", "at_64", "tokens_per_s")
    bf16, int4 = _get(steps, "int4_3b", "bf16"), _get(steps, "int4_3b", "int4")
    floors = {
        "single_stream_fraction_of_bandwidth_limit": (0.65, _get(steps, "engine", "single_stream",
                                                                 "fraction_of_limit")),
        "tokens_per_s_at_64_in_flight": (10_000, at64),
        "tokens_per_s_at_256_in_flight": (25_000, _get(steps, "engine", "at_256", "tokens_per_s")),
        "vs_transformers_continuous_batching_at_256": (10.0, _ratio(_get(steps, "engine", "at_256", "tokens_per_s"),
                                                                    _get(steps, "hf", "continuous", "tokens_per_s"))),
        "http_vs_in_process_at_64": (0.8, _ratio(_get(steps, "http", "streams_64", "tokens_per_s"), at64)),
        "prefill_prompt_tokens_per_s_64x500": (150_000, _get(steps, "prefill", "prompt_tokens_per_s")),
        "int4_vs_bf16_3b_single_stream": (1.6, _ratio(_get(int4, "single_stream", "decode_tokens_per_s"),
                                                      _get(bf16, "single_stream", "decode_tokens_per_s"))),
        "int4_vs_bf16_3b_at_64": (1.0, _ratio(_get(int4, "at_64", "tokens_per_s"), _get(bf16, "at_64", "tokens_per_s"))),
        "serves_70b_int4": (True, _get(steps, "70b", "serves")),
        "speculative_greedy_identical": (True, _get(steps, "spec", "greedy_identical")),
        "speculative_always_agree_acceptance_rate": (1.0, _get(steps, "spec", "acceptance_rate")),
    }
    ceilings = {f"step_wall_over_gpu_kernel_time_batch_{b}": (1.15, _get(steps, "profile", f"batch_{b}",
                                                                         "wall_over_kernel_time")) for b in (1, 64)}
    out = {name: {"target": target, "value": value, "met": None if value is None else value >= target}
           for name, (target, value) in floors.items()}
    out.update({name: {"target": target, "at_most": True, "value": value, "met": None if value is None else value <= target}
                for name, (target, value) in ceilings.items()})
    return out


def cuda_device() -> str | None:
    """The GPU's name, or None without torch or CUDA (the check then skips every step)."""
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def check(only: list[str], budget_s: float, seed: int, out: Path = OUT) -> dict:
    began = time.perf_counter()
    device = cuda_device()
    out.mkdir(parents=True, exist_ok=True)
    steps: dict = {}
    for name in TIME_BOX_S:
        if name not in only:
            steps[name] = {"skipped": "not asked for (--only)"}
            continue
        left = budget_s - RESERVE_S - (time.perf_counter() - began)
        if device is None:
            steps[name] = {"skipped": "no CUDA: torch sees no GPU"}
        elif left < 10:
            steps[name] = {"skipped": f"time box: {budget_s:.0f} s budget spent"}
        else:
            log(f"step {name} (up to {min(TIME_BOX_S[name], left):.0f} s)")
            step_began = time.perf_counter()
            steps[name] = run_step(name, min(TIME_BOX_S[name], left), seed, out)
            steps[name].setdefault("step_s", round(time.perf_counter() - step_began, 1))
        log(f"{name}: {json.dumps(steps[name])[:300]}")
    result = {"device": device or "no CUDA", "steps": steps, "goals": goals(steps),
              "total_s": round(time.perf_counter() - began, 1), "out": str(out)}
    (out / "gpu_check.json").write_text(json.dumps(result, indent=1))
    return result


def step_names(values: list[str]) -> list[str]:
    """`--only` takes names apart by spaces or commas: `--only engine,int4_table` or `--only engine int4_table`."""
    names = [name for value in values for name in value.split(",") if name]
    unknown = sorted(set(names) - set(TIME_BOX_S))
    if unknown:
        raise argparse.ArgumentTypeError(f"no step {', '.join(unknown)}: the steps are {', '.join(TIME_BOX_S)}")
    return names


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="STEP[,STEP]", default=list(TIME_BOX_S),
                        help=f"the steps to run, of: {', '.join(TIME_BOX_S)}")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the JSON and the steps' files")
    parser.add_argument("--step", choices=[n for n in TIME_BOX_S if n != "tests"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        only = step_names(args.only)
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    if args.step:  # one step in this process (run_step starts it so)
        from benchmarks import gpu_check_profile, gpu_check_steps  # torch and the engine load here only

        try:
            result = {**gpu_check_steps.STEPS, **gpu_check_profile.STEPS}[args.step](args.seed, args.out)
        except Exception as error:  # reported in the JSON, not a traceback for the parent to parse
            result = {"error": repr(error)[:1000]}
        print(json.dumps(result), flush=True)
        return
    print(json.dumps(check(only, args.budget_s, args.seed, args.out)), flush=True)


if __name__ == "__main__":
    main()
