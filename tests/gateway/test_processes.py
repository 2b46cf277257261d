"""`python -m gateway --workers 2`: shared port, aggregated /metrics, SIGHUP reload, clean stop."""
from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from gw_helpers import base_config, tier

ROOT = Path(__file__).parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _requests_total(metrics_text: str) -> float:
    return sum(float(m) for m in re.findall(r'^tiergate_requests_total\{[^}]*tier="small"[^}]*\} (\S+)$',
                                            metrics_text, re.M))


async def test_two_processes_share_port_metrics_and_reload_on_sighup(fakes, redis_prefix, tmp_path, http):
    (fake, url), = await fakes(1)
    path = tmp_path / "tiergate.yaml"
    doc = base_config([tier("small", 1, [url])], redis_prefix)
    path.write_text(yaml.safe_dump(doc))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("TIERGATE_REDIS_URL", "PROMETHEUS_MULTIPROC_DIR")}
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "--config", str(path), "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "2"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                async with http.get(base + "/health") as response:
                    if response.status == 200:
                        break
            except OSError:
                await asyncio.sleep(0.1)
        pids = set()
        for _ in range(300):  # a new connection each time: the kernel spreads them over both processes
            try:
                async with http.get(base + "/health", headers={"Connection": "close"}) as response:
                    pids.add((await response.json())["pid"])
            except OSError:
                pass
            if len(pids) == 2:
                break
            await asyncio.sleep(0.05)
        assert len(pids) == 2
        payload = {"model": "small", "messages": [{"role": "user", "content": "hi"}]}
        for _ in range(20):
            async with http.post(base + "/v1/chat/completions", json=payload,
                                 headers={"Connection": "close"}) as response:
                assert response.status == 200
        async with http.get(base + "/metrics") as response:
            assert _requests_total(await response.text()) == 20  # both processes' counts, summed

        stat = path.stat()
        path.write_text(yaml.safe_dump({**doc, "aliases": {"quick": "small"}}))
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the file watcher sees no change...
        proc.send_signal(signal.SIGHUP)  # ...so only SIGHUP can make both processes reload
        await asyncio.sleep(0.5)
        for _ in range(10):
            async with http.get(base + "/v1/models", headers={"Connection": "close"}) as response:
                assert "quick" in {m["id"] for m in (await response.json())["data"]}
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, proc.stderr.read().decode()[-2000:]
