"""`python -m policies hash-key KEY` | `python -m policies rebuild-ledger LOG... [--redis-url U] [--prefix P]`."""
from __future__ import annotations

import argparse
import asyncio
import glob
import json
import sys
from dataclasses import replace

from redis.exceptions import RedisError

from policies.keys import hash_key
from typedconfig import ConfigError


def _rebuild(args: argparse.Namespace) -> int:
    from redis.asyncio import Redis

    from policies.rebuild import rebuild_ledger
    from policies.store import PolicyStore

    settings = None
    if args.config:  # its `redis:` section, any mode (the gateway's own reader and client)
        from gateway.config import parse_redis
        from typedconfig import Fields

        settings = parse_redis(Fields(_yaml_mapping(args.config), "", args.config), "redis")
    prefix = args.prefix or (settings.key_prefix if settings else "tiergate:")
    paths = sorted({p for pattern in args.logs for p in (glob.glob(pattern) or [pattern])})

    def client():
        if args.redis_url or settings is None or (settings.mode == "single" and not settings.url):
            return Redis.from_url(args.redis_url or "redis://127.0.0.1:6379/0")
        from gateway.redis_conn import connect

        return connect(replace(settings, socket_timeout_s=max(settings.socket_timeout_s, 10.0)))

    async def run() -> dict:
        redis = client()
        try:
            return await rebuild_ledger(PolicyStore(redis, prefix, 60), paths)
        finally:
            await redis.aclose()

    print(json.dumps(asyncio.run(run())))
    return 0


def _yaml_mapping(path: str) -> dict:
    import yaml

    with open(path, encoding="utf-8") as fh:
        raw = yaml.safe_load(fh) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: top level must be a mapping")
    return raw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policies")
    sub = parser.add_subparsers(dest="command", required=True)
    hk = sub.add_parser("hash-key", help="print the SHA-256 hex hash of an API key for the config")
    hk.add_argument("key")
    rb = sub.add_parser("rebuild-ledger", help="recompute the Redis spend ledger from usage logs")
    rb.add_argument("logs", nargs="+", help="usage log files or globs (all replicas, rotated ones too)")
    rb.add_argument("--redis-url", default=None, help="default: the redis section of --config (any mode), else redis://127.0.0.1:6379/0")
    rb.add_argument("--prefix", default=None, help="default: redis.key_prefix of --config")
    rb.add_argument("--config", default=None, help="gateway config YAML to read the Redis URL and prefix from")
    args = parser.parse_args(argv)
    if args.command == "hash-key":
        print(hash_key(args.key))
        return 0
    try:
        return _rebuild(args)
    except (OSError, ValueError, RedisError, ConfigError) as exc:
        print(f"rebuild-ledger: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
