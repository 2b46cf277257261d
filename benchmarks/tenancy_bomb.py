"""Memory before authentication: the peak resident-memory growth of one gateway process while it
refuses a gzip body of about 60 KB that inflates to 60 MB of JSON, sent without a key and with
one (limits.max_body_bytes at its default, 1 MiB).

The peak is the kernel's high-water mark (VmHWM), reset before each send through
/proc/PID/clear_refs, so a short spike between samples is not missed.
`python -m benchmarks.tenancy_bomb` prints one JSON object as its last line.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from launcher import commands
from launcher.group import ProcessGroup
from launcher.processes import free_port
from measure.bombs import json_bomb
from measure.rss import PROC, describe, tree
from policies.keys import hash_key

INFLATED = 60_000_000


def _config(path: Path, key: str, usage_dir: Path) -> None:
    path.write_text(json.dumps({  # JSON is YAML; the worker is never reached: every bomb is refused first
        "tiers": [{"name": "t", "level": 1, "model": "m", "price_per_mtok": {"input": 0.1, "output": 0.2},
                   "workers": [{"url": "http://127.0.0.1:9"}]}],
        "health": {"interval_s": 5.0},
        "policy": {"usage_log": {"dir": str(usage_dir)}},
        "tenants": {"bench": {"keys": [{"id": "k", "sha256": hash_key(key)}]}}}))


def _status_kb(pid: int, field: str) -> int:
    for line in (PROC / str(pid) / "status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


def _send(url: str, body: bytes, key: str | None) -> int:
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as refused:
        return refused.code


def _peak_growth_mb(pid: int, url: str, body: bytes, key: str | None) -> tuple[int, float]:
    (PROC / str(pid) / "clear_refs").write_text("5")  # VmHWM := VmRSS now
    before = _status_kb(pid, "VmRSS")
    status = _send(url, body, key)
    time.sleep(0.5)  # the connection's unread rest is drained after the answer
    return status, round((_status_kb(pid, "VmHWM") - before) / 1024, 2)


def _wait_up(url: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def measure() -> dict:
    key = "sk-bench-" + uuid.uuid4().hex
    tmp = Path(tempfile.mkdtemp(prefix="tiergate-bomb-"))
    group, port = ProcessGroup(), free_port()
    try:
        _config(tmp / "gateway.yaml", key, tmp / "usage")
        root = group.spawn("gateway", commands.gateway_processes(tmp / "gateway.yaml", port, workers=1)).pid
        base = f"http://127.0.0.1:{port}"
        _wait_up(base + "/health")
        serving = next(p for p in tree(root) if describe(p)["role"] == "gateway" and p != root)
        body = json_bomb(INFLATED, "gzip")
        url = base + "/v1/chat/completions"
        no_key_status, no_key_mb = _peak_growth_mb(serving, url, body, None)
        key_status, key_mb = _peak_growth_mb(serving, url, body, key)
        return {"bomb_compressed_bytes": len(body), "bomb_inflated_bytes": INFLATED, "body_limit_bytes": 1 << 20,
                "bomb_no_key_status": no_key_status, "bomb_no_key_peak_rss_growth_mb": no_key_mb,
                "bomb_with_key_status": key_status, "bomb_with_key_peak_rss_growth_mb": key_mb}
    finally:
        group.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    print(json.dumps(measure()))
