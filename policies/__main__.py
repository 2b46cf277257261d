"""`python -m policies hash-key KEY` | `rebuild-ledger LOG... [--redis-url U] [--prefix P]` |
`rebuild-registry AUDIT_LOG... [--redis-url U] [--prefix P]` | `tenants ...` | `keys ...` (the admin API)."""
from __future__ import annotations

import argparse
import asyncio
import glob
import json
import sys

from redis.exceptions import RedisError

from policies.keys import hash_key
from policies.registry import client


def _on_redis(url: str, work) -> int:
    """Run `work(redis)` against the Redis at `url` and print its JSON answer."""
    from redis.asyncio import Redis

    async def run() -> dict:
        redis = Redis.from_url(url)
        try:
            return await work(redis)
        finally:
            await redis.aclose()

    print(json.dumps(asyncio.run(run())))
    return 0


def _paths(patterns: list[str]) -> list[str]:
    return sorted({p for pattern in patterns for p in (glob.glob(pattern) or [pattern])})


def _rebuild(args: argparse.Namespace) -> int:
    from policies.rebuild import rebuild_ledger
    from policies.store import PolicyStore

    return _on_redis(args.redis_url, lambda redis: rebuild_ledger(PolicyStore(redis, args.prefix, 60),
                                                                  _paths(args.logs)))


def _rebuild_registry(args: argparse.Namespace) -> int:
    from policies.registry.rebuild import rebuild_registry
    from policies.registry.store import RegistryStore

    return _on_redis(args.redis_url, lambda redis: rebuild_registry(RegistryStore(redis, args.prefix),
                                                                    _paths(args.logs)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policies")
    sub = parser.add_subparsers(dest="command", required=True)
    hk = sub.add_parser("hash-key", help="print the SHA-256 hex hash of an API key for the config")
    hk.add_argument("key")
    rb = sub.add_parser("rebuild-ledger", help="recompute the Redis spend ledger from usage logs")
    rb.add_argument("logs", nargs="+", help="usage log files or globs (all replicas, rotated ones too)")
    rb.add_argument("--redis-url", default="redis://127.0.0.1:6379/0",
                    help="a single Redis; for a gateway config's Redis in any mode: python -m gateway.rebuild_ledger")
    rb.add_argument("--prefix", default="tiergate:", help="the gateway's redis.key_prefix")
    rr = sub.add_parser("rebuild-registry", help="rebuild the API-managed tenants and keys from the audit logs")
    rr.add_argument("logs", nargs="+", help="audit log files or globs (audit-*.jsonl of every replica)")
    rr.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    rr.add_argument("--prefix", default="tiergate:", help="the gateway's redis.key_prefix")
    client.add_commands(sub)
    args = parser.parse_args(argv)
    if args.command == "hash-key":
        print(hash_key(args.key))
        return 0
    try:
        if args.command in ("tenants", "keys"):
            print(json.dumps(client.run(args), indent=2))
            return 0
        return _rebuild_registry(args) if args.command == "rebuild-registry" else _rebuild(args)
    except client.ApiError as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError, RedisError) as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
