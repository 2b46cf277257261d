"""Real processes for end-to-end tests: inference workers (backends.worker) and the gateway."""
from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import redis
import yaml

from gw_helpers import SHARED_REDIS

ROOT = Path(__file__).parents[2]
MODEL = "smollm2-135m"


def require_worker_module() -> None:
    if importlib.util.find_spec("backends.worker") is None:
        pytest.fail("backends.worker is missing: these end-to-end tests need the real inference worker "
                    "(`python -m backends.worker --model smollm2-135m --port P`)", pytrace=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not become healthy in {timeout_s}s")


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TIERGATE_REDIS_URL", "PROMETHEUS_MULTIPROC_DIR")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


def start_worker(port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "backends.worker", "--model", MODEL, "--port", str(port)],
                            cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Stack:
    """N workers (started here) behind one gateway process, using the shared Redis."""

    def __init__(self, tmp: Path, tiers_for, n_workers: int = 2, **sections):
        require_worker_module()
        self.procs: list[subprocess.Popen] = []
        self.prefix = f"tge2e:{uuid.uuid4().hex[:8]}:"
        self.worker_urls = []
        try:
            for _ in range(n_workers):
                port = free_port()
                self.worker_urls.append(f"http://127.0.0.1:{port}")
                self.procs.append(start_worker(port))
            self.workers = list(self.procs)
            for url, proc in zip(self.worker_urls, self.workers):
                wait_healthy(url, proc)
            doc = {"tiers": tiers_for(self.worker_urls), "redis": {"url": SHARED_REDIS, "key_prefix": self.prefix},
                   "health": {"interval_s": 0.5, "timeout_s": 1.0}, "timeouts": {"connect_s": 1.0, "read_s": 60.0}}
            doc.update(sections)
            config = tmp / "tiergate-e2e.yaml"
            config.write_text(yaml.safe_dump(doc))
            port = free_port()
            self.url = f"http://127.0.0.1:{port}"
            gateway = subprocess.Popen([sys.executable, "-m", "gateway", "--config", str(config), "--host",
                                        "127.0.0.1", "--port", str(port), "--workers", "1"],
                                       cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append(gateway)
            wait_healthy(self.url, gateway, 60)
        except BaseException:
            self.close()
            raise

    def label(self, index: int) -> str:
        return self.worker_urls[index].removeprefix("http://")

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        client = redis.Redis.from_url(SHARED_REDIS)
        keys = list(client.scan_iter(match=self.prefix + "*", count=500))
        if keys:
            client.delete(*keys)
        client.close()


def tier(name: str, level: int, urls: list[str]) -> dict:
    return {"name": name, "level": level, "model": MODEL, "price_per_mtok": {"input": 0.1, "output": 0.2},
            "workers": [{"url": u} for u in urls]}
