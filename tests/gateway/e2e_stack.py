"""Real processes for end-to-end tests: inference workers (backends.worker) and the gateway."""
from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest
import yaml

from launcher import commands
from launcher.group import ProcessGroup
from launcher.workers import worker_command
from tests.support import SHARED_REDIS, delete_prefix, free_port

MODEL = "smollm2-135m"


def require_worker_module() -> None:
    if importlib.util.find_spec("backends.worker") is None:
        pytest.fail("backends.worker is missing: these end-to-end tests need the real inference worker "
                    "(`python -m backends.worker --model smollm2-135m --port P`)", pytrace=False)


class Stack:
    """N workers (started here) behind one gateway process, using the shared Redis; each
    process logs to a file in tmp, shown when a start fails. `running_workers` are URLs of workers
    started by someone else (the session's `shared_worker`): they come first in `worker_urls`,
    before the `n_workers` started here, and are never stopped here."""

    def __init__(self, tmp: Path, tiers_for, n_workers: int = 2, worker_flags: tuple[str, ...] = (),
                 running_workers: tuple[str, ...] = (), **sections):
        require_worker_module()
        self.group = ProcessGroup(tmp)
        self.prefix = f"tge2e:{uuid.uuid4().hex[:8]}:"
        try:
            ports = [free_port() for _ in range(n_workers)]
            self.workers = [self.group.spawn(f"worker-{port}", worker_command(MODEL, port, *worker_flags))
                            for port in ports]
            started = [f"http://127.0.0.1:{port}" for port in ports]
            for url, proc in zip(started, self.workers):
                self.group.wait_healthy(url, proc)
            self.worker_urls = [*running_workers, *started]
            doc = {"tiers": tiers_for(self.worker_urls), "redis": {"url": SHARED_REDIS, "key_prefix": self.prefix},
                   "health": {"interval_s": 0.5, "timeout_s": 1.0}, "timeouts": {"connect_s": 1.0, "read_s": 60.0}}
            doc.update(sections)
            self.start_gateway(tmp / "tiergate-e2e.yaml", doc)
        except BaseException:
            self.close()
            raise

    def start_gateway(self, config: Path, doc: dict) -> None:
        config.write_text(yaml.safe_dump(doc))
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        gateway = self.group.spawn("gateway", commands.gateway_processes(config, port, workers=1))
        self.group.wait_healthy(self.url, gateway, 60)

    def label(self, index: int) -> str:
        return self.worker_urls[index].removeprefix("http://")

    def close(self) -> None:
        self.group.stop()
        delete_prefix(self.prefix)


def tier(name: str, level: int, urls: list[str]) -> dict:
    return {"name": name, "level": level, "model": MODEL, "price_per_mtok": {"input": 0.1, "output": 0.2},
            "workers": [{"url": u} for u in urls]}
