"""The soak benchmark: its slope and drift arithmetic on known series, process discovery from
/proc, a refusal when the local stack's worker ports are taken, and a short real run against
fake upstreams and a real gateway whose JSON line must cover every process."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from measure import rss
from measure.stats import drift, latency_windows
from tests.support import Pending, wait_until

ROOT = Path(__file__).parents[2]


def test_slope_is_zero_for_flat_series_and_exact_for_linear_growth():
    assert rss.slope_pct_per_10min([(t, 500_000) for t in range(0, 1800, 10)]) == 0
    wobble = [(t, 500_000 + (1000 if t % 20 else -1000)) for t in range(0, 1800, 10)]
    assert abs(rss.slope_pct_per_10min(wobble)) < 0.05
    # 100 + 0.01/s over 10 min: mean 103, so 6 units per 10 min = 5.825% of the mean
    assert rss.slope_pct_per_10min([(t, 100 + 0.01 * t) for t in range(0, 601)]) == pytest.approx(5.825, abs=1e-3)
    assert rss.slope_pct_per_10min([(0, 1), (1, 2)]) is None  # too few points to say


def test_summary_ignores_growth_during_warm_up():
    series = [(t, 1000 + 50 * t if t < 60 else 4000) for t in range(0, 600, 5)]
    out = rss.summarise({"pid": 1, "role": "gateway", "label": "gateway:1"}, series, warmup_s=60)
    assert out["slope_pct_per_10min"] == 0 and out["judged"]
    assert out["rss_mb_start"] == round(1000 / 1024, 1) and out["rss_mb_warm"] == round(3750 / 1024, 1)
    assert out["rss_mb_end"] == out["rss_mb_peak"] == round(4000 / 1024, 1) and out["samples"] == 120


def test_latency_windows_split_by_start_time_and_drift_compares_last_with_first():
    results = [{"t": t, "status": 200, "ttft": 0.1 * (1 + t // 100), "e2e": 1.0 * (1 + t // 100)}
               for t in range(100, 400)] + [{"t": 350, "status": 503}]
    windows = latency_windows(results, 100, 400, 3)
    assert [w["requests"] for w in windows] == [100, 100, 101] and [w["errors"] for w in windows] == [0, 0, 1]
    assert windows[0]["ttft_s"]["p50"] == pytest.approx(0.2) and windows[2]["e2e_s"]["p99"] == pytest.approx(4.0)
    assert drift(windows) == {"ttft_p50": 2.0, "ttft_p99": 2.0, "e2e_p50": 2.0, "e2e_p99": 2.0}


def test_process_tree_and_labels_come_from_proc():
    parent = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"])
    try:
        def forked() -> list[int] | Pending:
            tree = rss.tree(parent.pid)
            # a child read between fork and exec is still sh, or mid-exec has no command line yet
            execed = len(tree) >= 3 and all(rss.describe(p)["label"] not in ("sh", "?") for p in tree[1:])
            return tree if execed else Pending(tree)

        pids = wait_until(forked, 10, 0.02, what="sh forking both children and each exec'ing sleep")
        assert pids[0] == parent.pid and len(pids) == 3
        assert [rss.describe(p)["label"] for p in pids[1:]] == ["sleep", "sleep"]
        assert all(rss.rss_kb(p) > 0 for p in pids)
    finally:
        for pid in rss.tree(parent.pid)[::-1]:
            os.kill(pid, signal.SIGTERM)
        parent.wait()
    assert rss.rss_kb(parent.pid) is None and rss.tree(parent.pid) == []


@pytest.mark.live  # runs `python -m benchmarks.soak`
def test_refuses_to_start_the_local_stack_on_taken_worker_ports(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "tiergate.yaml"
        config.write_text(yaml.safe_dump({"tiers": [
            {"name": "small", "level": 1, "model": "smollm2-135m", "price_per_mtok": {"input": 1, "output": 1},
             "workers": [{"url": f"http://127.0.0.1:{port}"}]}]}))
        run = subprocess.run([sys.executable, "-m", "benchmarks.soak", "--config", str(config), "--minutes", "1"],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and run.stdout == ""
    assert f"[{port}]" in run.stderr and "already in use" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.live  # a whole stack
def test_short_self_contained_soak_samples_every_process_and_stops_them():
    run = subprocess.run([sys.executable, "-m", "benchmarks.soak", "--self-contained", "--minutes", "0.3",
                          "--rate", "10", "--sample-s", "1", "--progress-s", "5"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "[soak]" in run.stderr  # progress lines
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["mode"] == "self-contained" and out["left_running"] == []
    assert out["errors"] == 0 and out["errors_by_status"] == {} and out["shed_by_client"] == 0
    assert 90 <= out["requests"] == out["ok"] <= 400  # ~180 expected at 10/s for 18 s
    procs = out["rss"]["processes"]
    assert sorted(p["role"] for p in procs) == ["gateway"] + ["upstream"] * 4  # one fake per tier
    assert len({p["label"] for p in procs}) == 5 and out["rss"]["exited_pids"] == []
    for p in procs:
        assert p["samples"] >= 10 and 5 < p["rss_mb_start"] <= p["rss_mb_peak"] < 2000
        assert p["rss_mb_end"] <= p["rss_mb_peak"] and p["slope_pct_per_10min"] is not None
        assert p["judged"] == (p["role"] == "gateway")
    assert out["rss"]["max_slope_pct_per_10min"] == next(p for p in procs if p["judged"])["slope_pct_per_10min"]
    windows = out["latency"]["windows"]
    assert len(windows) == 3 and sum(w["requests"] for w in windows) <= out["requests"]
    for w in windows:
        assert w["requests"] > 10 and w["errors"] == 0
        assert 0 < w["ttft_s"]["p50"] <= w["ttft_s"]["p99"] < 10 and 0 < w["e2e_s"]["p50"] <= w["e2e_s"]["p99"] < 10
    assert all(r > 0 for r in out["latency"]["drift_last_over_first"].values())
    # 18 s cannot tell a leak from warm-up, so either verdict may come; it must follow from the figures
    memory_ok = out["rss"]["max_slope_pct_per_10min"] < out["rss"]["goal_pct_per_10min"]
    latency_ok = all(r <= out["latency"]["max_drift"] for r in out["latency"]["drift_last_over_first"].values())
    assert out["rss"]["meets_goal"] == memory_ok and out["latency"]["stable"] == latency_ok
    assert out["verdict"] == ("pass" if memory_ok and latency_ok else "fail"), out["verdict"]
