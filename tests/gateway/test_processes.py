"""`python -m gateway --workers 2`: shared port, aggregated /metrics, SIGHUP reload, clean stop."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.gateway.gw_helpers import base_config, tier
from launcher import commands
from launcher.group import clean_env
from tests.support import free_port, wait_for
from tests.support.metrics import metric

pytestmark = pytest.mark.live  # gateway processes

ROOT = Path(__file__).parents[2]


def _requests_total(page: str) -> float:
    return metric(page, "tiergate_requests_total", default=0.0, tier="small")


async def test_two_processes_share_port_metrics_and_reload_on_sighup(fakes, redis_prefix, tmp_path, http):
    (fake, url), = await fakes(1)
    path = tmp_path / "tiergate.yaml"
    doc = base_config([tier("small", 1, [url])], redis_prefix)
    path.write_text(yaml.safe_dump(doc))
    port = free_port()
    proc = subprocess.Popen(commands.gateway_processes(path, port, workers=2), cwd=ROOT, env=clean_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        pids = set()

        async def both_answered() -> bool:  # a new connection each time: the kernel spreads them
            try:
                async with http.get(base + "/health", headers={"Connection": "close"}) as response:
                    pids.add((await response.json())["pid"])
            except OSError:
                pass
            return len(pids) == 2

        await wait_for(both_answered, timeout_s=30)
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

        async def all_reloaded() -> bool:  # ten fresh connections in a row, spread over both processes
            for _ in range(10):
                async with http.get(base + "/v1/models", headers={"Connection": "close"}) as response:
                    if "quick" not in {m["id"] for m in (await response.json())["data"]}:
                        return False
            return True

        await wait_for(all_reloaded, timeout_s=15)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, proc.stderr.read().decode()[-2000:]
