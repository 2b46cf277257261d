"""`python -m policies hash-key KEY` | `python -m policies rebuild-ledger LOG... [--redis-url U] [--prefix P]`."""
from __future__ import annotations

import argparse
import asyncio
import glob
import json
import sys

from redis.exceptions import RedisError

from policies.keys import hash_key


def _rebuild(args: argparse.Namespace) -> int:
    from redis.asyncio import Redis

    from policies.rebuild import rebuild_ledger
    from policies.store import PolicyStore

    paths = sorted({p for pattern in args.logs for p in (glob.glob(pattern) or [pattern])})

    async def run() -> dict:
        redis = Redis.from_url(args.redis_url)
        try:
            return await rebuild_ledger(PolicyStore(redis, args.prefix, 60), paths)
        finally:
            await redis.aclose()

    print(json.dumps(asyncio.run(run())))
    return 0


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
    args = parser.parse_args(argv)
    if args.command == "hash-key":
        print(hash_key(args.key))
        return 0
    try:
        return _rebuild(args)
    except (OSError, ValueError, RedisError) as exc:
        print(f"rebuild-ledger: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
