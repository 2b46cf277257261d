"""Prometheus for the local stack (`python -m launcher --prometheus auto|on|off`) and the scrape
config for the default stack (dashboards/prometheus.yml: `python -m launcher.prometheus [--check]`).

Uses the `prometheus` binary (Debian: `apt-get install prometheus`, done by `make setup`) with a
scrape config written for the config being run (gateway + every local worker) and its TSDB
under .cache/prometheus/ (kept between runs, 7 days). Grafana then points at the printed URL.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from dashboards.scrape_config import render
from gateway.config import load_config
from launcher.processes import wait_healthy
from launcher.workers import LOCAL_HOSTS, ensure_worker_key, worker_keys, worker_targets

MODES = ("auto", "on", "off")
ROOT = Path(__file__).parents[1]
DEFAULT_CONFIG = ROOT / "config" / "tiergate.yaml"
DEFAULT_SCRAPE_FILE = ROOT / "dashboards" / "prometheus.yml"


class PrometheusUnavailable(RuntimeError):
    pass


def default_scrape_config() -> str:
    """The scrape config of the default stack (`make run` on config/tiergate.yaml, port 8080)."""
    ensure_worker_key()  # the config names it; only the targets are read here
    return render("127.0.0.1:8080", worker_targets(load_config(DEFAULT_CONFIG)))


def start(config, gateway_port: int, mode: str, port: int, cache: Path = Path(".cache/prometheus"),
          admin_key_file: str | None = None):
    """The started Prometheus process, or None when mode is off (or auto without the binary).
    With tenants, the gateway's per-tenant series need the admin key, read from `admin_key_file`."""
    if mode == "off":
        return None
    binary = shutil.which("prometheus")
    if binary is None:
        if mode == "on":
            raise PrometheusUnavailable("--prometheus on: no `prometheus` binary on PATH "
                                        "(`make setup` installs it; Debian/Ubuntu: apt-get install prometheus)")
        return None
    cache.mkdir(parents=True, exist_ok=True)
    scrape = cache / "prometheus.yml"
    workers = [t for t in worker_targets(config) if urlsplit(f"http://{t}").hostname in LOCAL_HOSTS]
    scrape.write_text(render(f"127.0.0.1:{gateway_port}", workers, admin_key_file=admin_key_file,
                             worker_key_file=worker_key_file(config, workers, cache)))
    proc = subprocess.Popen([binary, f"--config.file={scrape}", f"--storage.tsdb.path={cache / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=7d",
                             "--log.level=warn"])
    if wait_healthy(f"http://127.0.0.1:{port}", proc, 15, path="/-/ready"):
        return proc
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=10)
    message = f"prometheus did not start on port {port} (port taken? see its log above)"
    if mode == "on":
        raise PrometheusUnavailable(message)
    print(f"warning: {message}; the stack runs without it", flush=True)
    return None


def worker_key_file(config, targets: list[str], cache: Path) -> Path | None:
    """A file (owner-only) with the key the local workers take, for scraping their /metrics."""
    keys = {key for url, key in worker_keys(config).items() if urlsplit(url).netloc in targets and key}
    if not keys:
        return None
    if len(keys) > 1:
        raise PrometheusUnavailable("prometheus scrapes the local workers with one key; this config gives them "
                                    "several (api_key_env): name one variable for all local workers")
    path = cache / "worker.key"
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(keys.pop())
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launcher.prometheus",
                                     description="write dashboards/prometheus.yml for the default stack")
    parser.add_argument("--check", action="store_true", help="only fail when the file is stale")
    args = parser.parse_args(argv)
    text = default_scrape_config()
    if DEFAULT_SCRAPE_FILE.exists() and DEFAULT_SCRAPE_FILE.read_text() == text:
        return 0
    if args.check:
        print(f"stale: {DEFAULT_SCRAPE_FILE.relative_to(ROOT)} (run `python -m launcher.prometheus`)")
        return 1
    DEFAULT_SCRAPE_FILE.write_text(text)
    print(f"wrote {DEFAULT_SCRAPE_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
