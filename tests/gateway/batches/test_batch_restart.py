"""A gateway killed mid-batch (SIGKILL: no goodbye) and started again resumes the batch: every
line is answered exactly once in the output, and every run billed once, whatever was in flight."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import aiohttp
import pytest
import yaml

from launcher import commands
from launcher.group import clean_env
from tests.gateway.batches.batch_helpers import batch_config, client, finished, jsonl, lines_of, submit, until, usage_of
from tests.support import free_port, wait_for

pytestmark = pytest.mark.live  # gateway processes, one of them killed

ROOT = Path(__file__).parents[3]
LINES = 60


async def _start(path: Path, port: int) -> subprocess.Popen:
    """The gateway process, once it answers /health (polled without blocking the fake upstream's loop)."""
    proc = subprocess.Popen(commands.gateway_processes(path, port, workers=1), cwd=ROOT, env=clean_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    async def healthy() -> bool:
        assert proc.poll() is None, "the gateway exited"
        try:
            async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/health") as r:
                return r.status == 200
        except aiohttp.ClientError:
            return False
    await wait_for(healthy, timeout_s=60, interval_s=0.1, what="gateway health")
    return proc


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL to the launcher and its serving process alike: no goodbye, the lease left held."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


async def test_a_killed_gateway_resumes_the_batch_and_answers_each_line_once(fakes, redis_prefix, tmp_path):
    (fake, url), = await fakes(1)
    fake.delay_s = 0.05
    path, port = tmp_path / "tiergate.yaml", free_port()
    path.write_text(yaml.safe_dump(batch_config(url, redis_prefix, tmp_path / "usage", lease_s=1, max_in_flight=4)))
    proc = await _start(path, port)
    try:
        async with client(f"http://127.0.0.1:{port}") as sdk:
            batch = await submit(sdk, jsonl(LINES, max_tokens=3))
            await until(sdk, batch.id, lambda b: b.request_counts.completed >= 10)
            _kill(proc)
            assert fake.in_flight > 0 or fake.served < LINES  # it died mid-batch
            proc = await _start(path, port)
            done = await finished(sdk, batch.id, timeout_s=120)
            out = await lines_of(sdk, done.output_file_id)
            usage = await usage_of(sdk)
    finally:
        _kill(proc)
    assert done.status == "completed" and done.request_counts.completed == LINES
    assert sorted(line["custom_id"] for line in out) == sorted(f"req-{i}" for i in range(LINES))
    billed = [t for day in usage["days"] for t in day["tiers"].values()]
    # each run billed at most once: a run the kill cut after its bill but before its line was written
    # ran again and generated again, so it is billed again (docs/batches.md)
    assert LINES <= sum(t["requests"] for t in billed) <= fake.served
    assert fake.served >= LINES  # lines cut by the kill ran again; their first answers were never kept
