"""Secure by default, as a process: `python -m gateway.process` on a reachable address without
`tenants:` exits 2 with one line that says why and how to proceed; with --insecure-open it
serves, and says so in a warning."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from launcher.group import clean_env
from launcher.processes import free_port, wait_for_port
from tests.gateway.gw_helpers import base_config, tier

pytestmark = pytest.mark.live  # gateway processes

ROOT = Path(__file__).parents[2]


def _serve(config: Path, port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "gateway.process", "--config", str(config), "--host", "0.0.0.0",
            "--port", str(port), *flags]


def test_a_reachable_address_without_tenants_needs_insecure_open(redis_prefix, tmp_path):
    config = tmp_path / "open.yaml"
    config.write_text(yaml.safe_dump(base_config([tier("small", 1, ["http://127.0.0.1:9"])], redis_prefix)))
    port = free_port()
    refused = subprocess.run(_serve(config, port), cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert "refusing to listen on 0.0.0.0 without `tenants:`" in line and "--insecure-open" in line
    proc = subprocess.Popen(_serve(config, port, "--insecure-open"), cwd=ROOT, env=clean_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, [proc], timeout_s=60)
    finally:
        proc.terminate()
        _, log = proc.communicate(timeout=30)
    assert any("WARNING" in line and "--insecure-open" in line and "open to anyone" in line
               for line in log.splitlines()), log
