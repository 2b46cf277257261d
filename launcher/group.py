"""Processes started together and stopped together, each logging to a file of its own, so a
failed start can say what the processes printed."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from launcher.processes import stop_processes, wait_for_port, wait_healthy

ROOT = Path(__file__).parents[1]
# A launched process finds its Redis and metrics directory from its own config and flags,
# never from what the launching shell happened to export.
INHERITED_NOT = ("TIERGATE_REDIS_URL", "PROMETHEUS_MULTIPROC_DIR")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in INHERITED_NOT}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               HF_HUB_DISABLE_PROGRESS_BARS="1", **extra)  # servers log lines, not progress bars
    return env


class ProcessGroup:
    def __init__(self, log_dir: Path | None = None, cwd: Path = ROOT, inherit_output: bool = False):
        self.log_dir, self.cwd, self.inherit_output = log_dir, cwd, inherit_output
        if log_dir is not None:
            Path(log_dir).mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen] = []
        self._logs: list = []

    def spawn(self, name: str, command: list[str], env: dict | None = None) -> subprocess.Popen:
        """Start one process; its output goes to log_dir/name.log, else to ours or nowhere."""
        out = None if self.inherit_output else subprocess.DEVNULL
        if self.log_dir is not None:
            out = open(Path(self.log_dir) / f"{name}.log", "wb")
            self._logs.append(out)
        proc = subprocess.Popen(command, cwd=self.cwd, env=env or clean_env(), stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def logs(self, chars: int = 2000) -> str:
        if self.log_dir is None:
            return "(no logs kept)"
        for log in self._logs:
            log.flush()
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-chars:]
                         for p in sorted(Path(self.log_dir).glob("*.log")))

    def log_text(self, name: str) -> str:
        """All that one process has printed so far."""
        for log in self._logs:
            log.flush()
        path = Path(self.log_dir) / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_port(self, port: int, timeout_s: float = 60) -> None:
        """Until something listens on the port; fails fast when any process of the group exits."""
        wait_for_port(port, self.procs, timeout_s, logs=self.logs)

    def wait_healthy(self, url: str, proc: subprocess.Popen, timeout_s: float = 120, path: str = "/health") -> None:
        if not wait_healthy(url, proc, timeout_s, path):
            raise RuntimeError(f"{url} did not become healthy in {timeout_s}s (exit code {proc.poll()})\n{self.logs()}")

    def stop(self) -> None:
        stop_processes(self.procs)
        for log in self._logs:
            log.close()
