"""One real inference worker process for a test (`python -m backends.worker`): started on a free
port, waited for until /health answers, stopped at the end; its log is kept for the test to read."""
from __future__ import annotations

import os
import subprocess
import tempfile
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from launcher.processes import free_port, stop_processes
from launcher.workers import worker_command
from tests.support.polling import wait_until
from webwire.internal_key import WORKER_KEY_ENV


class WorkerProcess:
    def __init__(self, model: str, flags: tuple[str, ...], log_path: Path, key: str | None = None):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        env = {k: v for k, v in os.environ.items() if k != WORKER_KEY_ENV}  # a key only when the test gives one
        with log_path.open("wb") as log:
            self.proc = subprocess.Popen(worker_command(model, self.port, *flags), stdout=subprocess.DEVNULL,
                                         stderr=log, env={**env, **({WORKER_KEY_ENV: key} if key else {})})

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def answers(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"the worker exited during start-up:\n{self.log()}")
        try:
            with urllib.request.urlopen(self.base + "/health", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        stop_processes([self.proc])


@contextmanager
def running_worker(model: str, *flags: str, timeout_s: float = 120, key: str | None = None) -> Iterator[WorkerProcess]:
    """A worker serving `model` with these command-line flags, answering before the body runs;
    with `key`, it answers only callers that send it (TIERGATE_WORKER_KEY)."""
    with tempfile.TemporaryDirectory(prefix="tiergate-worker-") as scratch:
        worker = WorkerProcess(model, flags, Path(scratch) / "worker.log", key)
        try:
            wait_until(worker.answers, timeout_s, 0.2, what=f"the {model} worker answering /health")
            yield worker
        finally:
            worker.stop()
