"""`python -m launcher` (what `make run` runs): the whole local stack in one command.

Starts an embedded Redis (when the config names no Redis URL), one inference worker per
distinct local worker URL in the config (`python -m backends.worker --model M --port P`, with
the `tracing:` section as flags when it is on; remote URLs are left alone), the gateway on
127.0.0.1:8080 (loopback only) with --workers processes, and Prometheus when its binary is installed. Waits for
every /health, prints one line per part (role and URL), and one Ctrl-C (or SIGTERM) stops
everything.

Each worker is started with the key the gateway sends it (the tier's api_key_env). The default
config names TIERGATE_WORKER_KEY; when the environment does not set it, a fresh random key is
made for this run, so the workers answer only this gateway.
"""
from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
import time
from urllib.parse import urlsplit

from gateway.config import ConfigError, load_config
from launcher import commands
from launcher.group import ProcessGroup, clean_env
from launcher.processes import wait_healthy
from launcher.prometheus import PrometheusUnavailable, start as start_prometheus
from launcher.workers import (ensure_worker_key, local_workers, threads_per_worker, worker_command, worker_env,
                              worker_keys)
from webwire.trace_flags import as_flags


def banner(role: str, url: str, note: str = "") -> None:
    print(f"{role:<11} {url}" + (f"  ({note})" if note else ""), flush=True)


def _args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m launcher", description=__doc__)
    parser.add_argument("--config", default="config/tiergate.yaml")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--workers", type=int, default=None, help="gateway processes (default: one per core)")
    parser.add_argument("--prometheus", choices=("auto", "on", "off"), default="auto",
                        help="also run Prometheus scraping the stack (auto: when the binary is installed)")
    parser.add_argument("--prometheus-port", type=int, default=9090)
    parser.add_argument("--admin-key-file", default=None,
                        help="a file holding the admin key: with tenants, Prometheus needs it for per-tenant series")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = _args(argv)
    ensure_worker_key()
    try:
        config = load_config(args.config)
        workers = local_workers(config)
    except ConfigError as exc:
        print(f"invalid config: {exc}", file=sys.stderr)
        return 2
    if workers and importlib.util.find_spec("backends.worker") is None:
        print("cannot start the local stack: the inference worker (python -m backends.worker) is not "
              "installed in this checkout; point the config's worker URLs at running "
              "OpenAI-compatible servers and use `python -m gateway` instead", file=sys.stderr)
        return 1
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    group, embedded = ProcessGroup(inherit_output=True), None
    try:
        from gateway.server.redis_conn import EmbeddedRedis, wants_embedded

        redis_url = config.redis.url
        if wants_embedded(config.redis, redis_url):
            embedded = EmbeddedRedis()
            redis_url = embedded.url
            banner("redis", redis_url, "embedded, append-only")
        threads = threads_per_worker(len(workers))
        keys = worker_keys(config)
        tracing = as_flags(config.tracing.for_workers())  # before `launch`: a worker's own flags win
        started = {url: group.spawn(f"worker-{urlsplit(url).port}", worker_command(
                       model, urlsplit(url).port, "--threads", str(threads), *tracing, *launch), env=worker_env(keys[url]))
                   for url, (model, launch) in workers.items()}
        for url, proc in started.items():
            if not wait_healthy(url, proc, 600):  # a CPU int4 worker compiles its decode steps first
                print(f"worker {url} did not become healthy", file=sys.stderr)
                return 1
            model, launch = workers[url]
            banner("worker", url, " ".join((model,) + launch))
        gateway = group.spawn("gateway", commands.gateway_processes(args.config, args.port, args.workers,
                                                                    "127.0.0.1", redis_url), env=clean_env())
        if not wait_healthy(f"http://127.0.0.1:{args.port}", gateway, 60):
            print("gateway did not become healthy", file=sys.stderr)
            return 1
        try:
            prometheus = start_prometheus(config, args.port, args.prometheus, args.prometheus_port,
                                          admin_key_file=args.admin_key_file)
        except PrometheusUnavailable as exc:
            print(exc, file=sys.stderr)
            return 1
        if prometheus is not None:
            group.procs.append(prometheus)
            banner("prometheus", f"http://localhost:{args.prometheus_port}", "Grafana dashboards: dashboards/README.md")
        banner("gateway", f"http://localhost:{args.port}/v1", "OpenAI base_url; metrics at /metrics")
        banner("console", f"http://localhost:{args.port}/console", "routing, savings, quality and workers")
        print("Ctrl-C stops everything.", flush=True)
        while not stopping:
            if any(proc.poll() is not None for proc in group.procs):
                dead = next(proc for proc in group.procs if proc.poll() is not None)
                print(f"stopping: {' '.join(dead.args[:4])} exited", file=sys.stderr)
                return 1
            time.sleep(0.3)
        return 0
    finally:
        group.stop()
        if embedded:
            embedded.stop()
