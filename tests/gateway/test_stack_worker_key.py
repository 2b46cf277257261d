"""`make run` (python -m launcher) with no worker key set: it makes one, starts its workers with it
and the gateway sends it, so the stack serves while the workers refuse anyone else."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from launcher.processes import free_port, stop_processes, wait_healthy
from tests.gateway.gw_helpers import base_config, tier
from webwire.internal_key import WORKER_KEY_ENV

pytestmark = pytest.mark.live  # a launcher, its worker and gateway processes
ROOT = Path(__file__).parents[2]


async def test_the_local_stack_serves_with_a_generated_worker_key(redis_prefix, tmp_path, http):
    worker = f"http://127.0.0.1:{free_port()}"
    small = {**tier("small", 1, [worker], model="smollm2-135m"), "api_key_env": WORKER_KEY_ENV}
    small["workers"][0]["launch"] = ["--kv-cache-gb", "0.25", "--max-model-len", "1024"]
    config = tmp_path / "tiergate.yaml"
    config.write_text(yaml.safe_dump(base_config([small], redis_prefix, timeouts={"connect_s": 1.0, "read_s": 60.0})))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != WORKER_KEY_ENV}  # no setting: the launcher makes one
    log = (tmp_path / "stack.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "launcher", "--config", str(config), "--port", str(port),
                             "--workers", "1", "--prometheus", "off"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        assert wait_healthy(f"http://127.0.0.1:{port}", proc, 300), (tmp_path / "stack.log").read_text()[-3000:]
        body = {"model": "small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        async with http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body) as answer:
            assert answer.status == 200, await answer.text()
        async with http.post(worker + "/v1/chat/completions", json={**body, "model": "smollm2-135m"}) as answer:
            assert answer.status == 401  # the worker answers only the gateway
        async with http.get(worker + "/health") as answer:
            assert answer.status == 200
    finally:
        stop_processes([proc], timeout_s=60)
        log.close()
