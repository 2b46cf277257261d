"""The real local stack for benchmarks, started exactly as `make run` starts it:
`python -m launcher --config C --port P --prometheus off` (real workers, embedded Redis,
the gateway's processes), on a free gateway port. It runs in a temporary directory, so its
embedded Redis and usage logs never mix with those of a `make run` from the checkout."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from gateway.config import load_config
from launcher.processes import free_port, wait_healthy
from launcher.workers import ensure_worker_key, local_workers

ROOT = Path(__file__).parents[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a TIME_WAIT leftover is not "in use"
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class LocalStack:
    def __init__(self, config: str, start_timeout_s: float = 300):
        self.config = str(Path(config).resolve())
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.tmp = tempfile.TemporaryDirectory(prefix="tiergate-stack-")
        self.log = Path(self.tmp.name) / "stack.log"

    def start(self) -> str:
        ensure_worker_key()  # the launcher below inherits it: this process can reach the workers too
        ports = [urlsplit(url).port for url in local_workers(load_config(self.config))]
        busy = [p for p in ports if port_in_use(p)]
        if busy:
            raise RuntimeError(f"worker port(s) {busy} of {self.config} are already in use (a `make run`?). "
                               "Stop it, or soak that stack instead: --url URL --pids PID_OF_ITS_LAUNCHER")
        port = free_port()
        env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "launcher", "--config", self.config,
                                          "--port", str(port), "--prometheus", "off"],
                                         cwd=self.tmp.name, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        if not wait_healthy(url, self.proc, self.start_timeout_s):
            self.stop()
            raise RuntimeError(f"the local stack did not become healthy; its log:\n{self.log_tail()}")
        return url

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        """SIGTERM the launcher (it stops its workers and gateway) and wait for it."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.tmp.cleanup()
