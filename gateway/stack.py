"""`python -m gateway.stack` (what `make run` runs): the whole local stack in one command.

Starts an embedded Redis (when the config names no Redis URL), one inference worker per
distinct local worker URL in the config (`python -m backends.worker --model M --port P`;
remote URLs are left alone), then the gateway on 0.0.0.0:8080 with --workers processes.
Waits for every /health, prints the URLs, and one Ctrl-C (or SIGTERM) stops everything.
"""
from __future__ import annotations

import argparse
import os
import importlib.util
import signal
import subprocess
import sys
import time
import urllib.request
from urllib.parse import urlsplit

from .config import ConfigError, load_config

LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def local_workers(config) -> dict[str, tuple[str, tuple[str, ...]]]:
    """url -> (model, launch flags) for the workers this machine must run; one model per URL."""
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for tier in config.tiers:
        for spec in tier.workers:
            if urlsplit(spec.url).hostname not in LOCAL_HOSTS:
                continue
            wanted = (tier.model, spec.launch)
            if found.setdefault(spec.url, wanted) != wanted:
                raise ConfigError(f"{config.source}: {spec.url} is listed twice with different models or "
                                  f"launch flags ({found[spec.url]}, {wanted}); one worker serves one model")
    return found


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float, path: str = "/health") -> bool:
    """Poll url+path until it answers 200; False if the process dies or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + path, timeout=1) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway.stack", description=__doc__)
    parser.add_argument("--config", default="config/tiergate.yaml")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--workers", type=int, default=None, help="gateway processes (default: one per core)")
    parser.add_argument("--prometheus", choices=("auto", "on", "off"), default="auto",
                        help="also run Prometheus scraping the stack (auto: when the binary is installed)")
    parser.add_argument("--prometheus-port", type=int, default=9090)
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        workers = local_workers(config)
    except ConfigError as exc:
        print(f"invalid config: {exc}", file=sys.stderr)
        return 2
    if workers and importlib.util.find_spec("backends.worker") is None:
        print("cannot start the local stack: the inference worker (python -m backends.worker) is not "
              "installed in this checkout yet; point the config's worker URLs at running "
              "OpenAI-compatible servers and use `python -m gateway` instead", file=sys.stderr)
        return 1

    procs: list[tuple[str, subprocess.Popen]] = []
    embedded = None
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        redis_url = config.redis.url
        if not redis_url:
            from .redis_conn import EmbeddedRedis
            embedded = EmbeddedRedis()
            redis_url = embedded.url
            print(f"redis    {redis_url} (embedded, append-only)", flush=True)
        # Several workers on one machine each get a share of the cores: OpenMP threads that
        # outnumber the cores spin against each other and every worker slows down.
        threads = max(1, (os.cpu_count() or 1) // len(workers)) if workers else 1
        for url, (model, launch) in workers.items():
            port = urlsplit(url).port
            proc = subprocess.Popen([sys.executable, "-m", "backends.worker", "--model", model, "--port", str(port),
                                     "--threads", str(threads), *launch])
            procs.append((url, proc))
        for url, proc in procs:
            if not wait_healthy(url, proc, 180):
                print(f"worker {url} did not become healthy", file=sys.stderr)
                return 1
            model, launch = workers[url]
            print(f"worker   {url} ({' '.join((model,) + launch)})", flush=True)
        command = [sys.executable, "-m", "gateway", "--config", args.config, "--port", str(args.port),
                   "--redis-url", redis_url] + (["--workers", str(args.workers)] if args.workers else [])
        gateway = subprocess.Popen(command)
        procs.append(("gateway", gateway))
        base = f"http://127.0.0.1:{args.port}"
        if not wait_healthy(base, gateway, 60):
            print("gateway did not become healthy", file=sys.stderr)
            return 1
        from dashboards.local_prometheus import PrometheusUnavailable, start as start_prometheus
        try:
            prometheus = start_prometheus(config, args.port, args.prometheus, args.prometheus_port)
        except PrometheusUnavailable as exc:
            print(exc, file=sys.stderr)
            return 1
        if prometheus is not None:
            procs.append(("prometheus", prometheus))
            print(f"prometheus http://localhost:{args.prometheus_port}  (Grafana dashboards: dashboards/README.md)",
                  flush=True)
        print(f"gateway  http://localhost:{args.port}/v1  (OpenAI base_url; metrics at /metrics)\n"
              "Ctrl-C stops everything.", flush=True)
        while not stopping:
            dead = [name for name, proc in procs if proc.poll() is not None]
            if dead:
                print(f"stopping: {dead[0]} exited", file=sys.stderr)
                return 1
            time.sleep(0.3)
        return 0
    finally:
        for _, proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in reversed(procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        if embedded:
            embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
