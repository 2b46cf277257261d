"""`python -m gateway --config config/tiergate.yaml --port 8080 --workers N [--host H] [--insecure-open]`

Listens on 127.0.0.1 by default. On any other address the config must have `tenants:`, unless
--insecure-open says to serve every endpoint open to anyone (gateway/server/exposure.py).

Runs N gateway processes sharing the port (SO_REUSEPORT; default one per core). Without a
Redis URL in the config (or TIERGATE_REDIS_URL) it first starts an embedded Redis and gives
its URL to every process, so affinity and limits are shared. With N > 1 the metrics run in
prometheus_client's multiprocess mode: any process's /metrics shows the sum over all.
SIGHUP is passed on to every process (config reload); SIGINT/SIGTERM stop everything.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import tempfile

log = logging.getLogger("gateway")


def _args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gateway", description="Tiergate gateway")
    parser.add_argument("--config", default="config/tiergate.yaml")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--redis-url", default=None, help="overrides redis.url from the config")
    parser.add_argument("--insecure-open", action="store_true",
                        help="serve without tenants on a non-loopback address: every endpoint open to anyone")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    args = _args(argv)
    from .config import ConfigError, load_config
    from .server.exposure import INSECURE_FLAG, refusal

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"invalid config: {exc}", file=sys.stderr)
        return 2
    if not args.insecure_open and (refused := refusal(args.host, config, False)) is not None:
        print(refused, file=sys.stderr)  # before the embedded Redis and the processes start
        return 2
    embedded = None
    redis_url = args.redis_url or os.environ.get("TIERGATE_REDIS_URL") or config.redis.url
    from .server.redis_conn import EmbeddedRedis, wants_embedded

    if wants_embedded(config.redis, redis_url):
        embedded = EmbeddedRedis()
        redis_url = embedded.url
    from .core.cache_salt import shared_secret
    shared_secret()  # one cache-salt secret for every process: a tenant's salt is the same whichever answers
    env = dict(os.environ, **({"TIERGATE_REDIS_URL": redis_url} if redis_url else {}))
    metrics_dir = None
    if args.workers > 1:
        metrics_dir = tempfile.mkdtemp(prefix="tiergate-metrics-")
        env["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    command = [sys.executable, "-m", "gateway.process", "--config", args.config, "--host", args.host,
               "--port", str(args.port)] + ([INSECURE_FLAG] if args.insecure_open else [])
    children = [subprocess.Popen(command, env=env) for _ in range(max(1, args.workers))]
    log.info("gateway: %d process(es) on %s:%d, Redis %s", len(children), args.host, args.port, redis_url)

    def forward(signum, _frame):
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGHUP, forward)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = 0
    try:
        for child in children:
            while True:
                try:
                    code = child.wait() or code
                    break
                except InterruptedError:
                    continue
    finally:
        forward(signal.SIGTERM, None)
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
        if embedded:
            embedded.stop()
        if metrics_dir:
            import shutil
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
