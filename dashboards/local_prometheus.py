"""Prometheus for the local stack (`python -m gateway.stack --prometheus auto|on|off`).

Uses the `prometheus` binary (Debian: `apt-get install prometheus`) when it is on PATH, with a
scrape config written for the config being run (gateway + every local worker) and its TSDB
under .cache/prometheus/ (kept between runs, 7 days). Grafana then points at the printed URL.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from .scrape_config import render, worker_targets

MODES = ("auto", "on", "off")


class PrometheusUnavailable(RuntimeError):
    pass


def start(config, gateway_port: int, mode: str, port: int, cache: Path = Path(".cache/prometheus")):
    """The started Prometheus process, or None when mode is off (or auto without the binary)."""
    if mode == "off":
        return None
    binary = shutil.which("prometheus")
    if binary is None:
        if mode == "on":
            raise PrometheusUnavailable("--prometheus on: no `prometheus` binary on PATH "
                                        "(Debian/Ubuntu: apt-get install prometheus)")
        return None
    cache.mkdir(parents=True, exist_ok=True)
    scrape = cache / "prometheus.yml"
    workers = [t for t in worker_targets(config) if urlsplit(f"http://{t}").hostname in ("127.0.0.1", "localhost")]
    scrape.write_text(render(f"127.0.0.1:{gateway_port}", workers))
    proc = subprocess.Popen([binary, f"--config.file={scrape}", f"--storage.tsdb.path={cache / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=7d",
                             "--log.level=warn"])
    if _ready(f"http://127.0.0.1:{port}", proc):
        return proc
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=10)
    message = f"prometheus did not start on port {port} (port taken? see its log above)"
    if mode == "on":
        raise PrometheusUnavailable(message)
    print(f"warning: {message}; the stack runs without it", flush=True)
    return None


def _ready(url: str, proc: subprocess.Popen, timeout_s: float = 15) -> bool:
    from gateway.stack import wait_healthy  # local: the stack imports this module

    return wait_healthy(url, proc, timeout_s, path="/-/ready")
