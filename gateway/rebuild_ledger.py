"""`python -m gateway.rebuild_ledger LOG_OR_GLOB... --config tiergate.yaml [--prefix P]`: the
ledger rebuilt from usage logs (policies/rebuild.py) on the Redis that a gateway config names, in
any `redis.mode`. The gateway owns the config and the connection; `python -m policies
rebuild-ledger --redis-url` is the same rebuild given a URL."""
from __future__ import annotations

import argparse
import asyncio
import glob
import json
import sys
from dataclasses import replace

from redis.exceptions import RedisError

from policies.rebuild import rebuild_ledger
from policies.store import PolicyStore
from typedconfig import ConfigError

from .config import load_config
from .server.redis_conn import connect

RECONCILE_TIMEOUT_S = 10.0  # a rebuild is one-off work: give each Redis call more than a request gets


async def _rebuild(config_path: str, prefix: str | None, paths: list[str]) -> dict:
    settings = load_config(config_path).redis
    if settings.mode == "single" and not settings.url:
        raise ValueError(f"{config_path}: redis.url is not set (the embedded Redis lives only as long as its gateway)")
    redis = connect(replace(settings, socket_timeout_s=max(settings.socket_timeout_s, RECONCILE_TIMEOUT_S)))
    try:
        return await rebuild_ledger(PolicyStore(redis, prefix or settings.key_prefix, 60), paths)
    finally:
        await redis.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway.rebuild_ledger", description=__doc__)
    parser.add_argument("logs", nargs="+", help="usage log files or globs (all replicas, rotated ones too)")
    parser.add_argument("--config", required=True, help="the gateway config whose redis section names the Redis")
    parser.add_argument("--prefix", default=None, help="default: the config's redis.key_prefix")
    args = parser.parse_args(argv)
    paths = sorted({p for pattern in args.logs for p in (glob.glob(pattern) or [pattern])})
    try:
        print(json.dumps(asyncio.run(_rebuild(args.config, args.prefix, paths))))
    except (OSError, ValueError, RedisError, ConfigError) as exc:
        print(f"rebuild-ledger: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
