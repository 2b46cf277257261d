"""Every benchmark that drives the stack runs clean against `make run`'s default config, at its
smallest setting: the next new kind of tier (as the embeddings tier once did to the soak) turns
this red instead of a 30-minute run. One stack, started as `make run` starts it, serves all."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.processes import free_port, stop_processes, wait_healthy

pytestmark = pytest.mark.live
ROOT = Path(__file__).parents[2]
CONFIG = ROOT / "config" / "tiergate.yaml"
ENV = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")


@pytest.fixture(scope="module")
def default_stack(tmp_path_factory):
    """(url, launcher pid) of `python -m launcher` on the default config, in a scratch directory."""
    port, cwd = free_port(), tmp_path_factory.mktemp("default-stack")
    log = open(cwd / "stack.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "launcher", "--config", str(CONFIG), "--port", str(port),
                             "--prometheus", "off"], cwd=cwd, env=ENV, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        # the int4 tier compiles its decode steps before serving (engine/device_defaults.py): minutes the first time
        assert wait_healthy(url, proc, 900), (cwd / "stack.log").read_text(errors="replace")[-3000:]
        yield url, proc.pid
    finally:
        stop_processes([proc], timeout_s=60)  # the launcher stops its workers and gateway first
        log.close()


def _last_json(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_soak(default_stack):
    url, pid = default_stack
    out = _last_json("benchmarks.soak", "--url", url, "--pids", str(pid), "--minutes", "0.3", "--rate", "3",
                     "--sample-s", "2", "--progress-s", "5")
    assert out["requests"] > 0 and out["errors"] == 0, out["errors_by_status"]
    assert {"small", "medium", "large", "expert", "auto"} <= set(out["models"]) and "minilm" not in out["models"]


def test_open_loop(default_stack):
    url, _ = default_stack
    out = _last_json("benchmarks.open_loop", "--url", url, "--fixed-rate", "--rate", "2", "--duration", "4")
    assert out["requests"] > 0 and out["errors"] == 0, out
    assert "minilm" not in out["models"]


def test_priority_through_the_batch_api(default_stack):
    url, _ = default_stack
    out = _last_json("benchmarks.priority", "--url", url, "--interactive-requests", "3", "--batch-size", "3",
                     "--rate", "2", "--max-tokens", "4", "--batch-max-tokens", "4")
    assert out["errors"] == 0 and out["batch_alone"]["answered"] == out["batch_beside"]["answered"] == 3, out
