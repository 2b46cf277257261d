"""`python -m benchmarks.gpu_check` where torch sees no GPU: it exits 0 at once, every step skipped
with a reason, and its last line still carries the issue's goals (with no values)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.live  # runs one of our command-line tools
ROOT = Path(__file__).parents[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the check runs for minutes: make gpu-check")
def test_without_cuda_every_step_is_skipped_and_the_goals_are_listed(tmp_path):
    done = _gpu_check(tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    steps = result["steps"]
    assert list(steps) == ["tests", "engine", "prefill", "profile", "spec", "int4_table", "int4_3b", "70b", "http", "hf"]
    assert all("no CUDA" in step["skipped"] for step in steps.values())
    assert len(done.stderr.strip().splitlines()) >= len(steps)  # a progress line per step
    goals = result["goals"]
    assert goals["single_stream_fraction_of_bandwidth_limit"]["target"] == 0.65
    assert goals["tokens_per_s_at_256_in_flight"]["target"] == 25_000
    assert goals["serves_70b_int4"]["target"] is True
    assert goals["speculative_greedy_identical"]["target"] is True
    assert goals["prefill_prompt_tokens_per_s_64x500"]["target"] == 150_000
    assert goals["step_wall_over_gpu_kernel_time_batch_64"] == {"target": 1.15, "at_most": True, "value": None,
                                                                "met": None}
    assert all(g["value"] is None and g["met"] is None for g in goals.values())
    assert json.loads((tmp_path / "gpu_check.json").read_text()) == result  # beside the steps' files


def _gpu_check(out, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--out", str(out), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the check runs for minutes: make gpu-check")
def test_only_runs_the_steps_named_and_refuses_unknown_ones(tmp_path):
    done = _gpu_check(tmp_path, "--only", "int4_table,prefill", "profile")
    assert done.returncode == 0, done.stderr[-2000:]
    steps = json.loads(done.stdout.strip().splitlines()[-1])["steps"]
    asked = {name for name, step in steps.items() if "no CUDA" in step["skipped"]}
    assert asked == {"int4_table", "prefill", "profile"}
    assert all(step["skipped"] == "not asked for (--only)" for name, step in steps.items() if name not in asked)
    refused = _gpu_check(tmp_path, "--only", "engine,int8_table")
    assert refused.returncode == 2 and "no step int8_table" in refused.stderr
