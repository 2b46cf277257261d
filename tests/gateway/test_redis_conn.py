"""The `redis:` section picks the client: one server, a Sentinel group's master or a Cluster; the
launcher embeds a Redis only in single mode without a URL (`make run`)."""
from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import SentinelConnectionPool

from gateway.config import parse_config
from gateway.server.redis_conn import connect, wants_embedded
from tests.gateway.gw_helpers import tier

TIERS = [tier("small", 1, ["http://127.0.0.1:9"])]


def _redis(section: dict):
    return parse_config({"tiers": TIERS, "redis": section}, "test.yaml").redis


async def test_each_mode_gets_its_client_with_the_configured_timeout():
    single = connect(_redis({"url": "redis://127.0.0.1:6379/0", "socket_timeout_s": 0.3}))
    sentinel = connect(_redis({"mode": "sentinel", "sentinels": ["127.0.0.1:26379"], "master_name": "tg"}))
    cluster = connect(_redis({"mode": "cluster", "cluster_nodes": ["127.0.0.1:7000", "127.0.0.1:7001"]}))
    assert type(single) is Redis and single.connection_pool.connection_kwargs["socket_timeout"] == 0.3
    assert isinstance(sentinel.connection_pool, SentinelConnectionPool)
    assert sentinel.connection_pool.service_name == "tg"
    assert isinstance(cluster, RedisCluster)
    assert sorted(n.port for n in cluster.nodes_manager.startup_nodes.values()) == [7000, 7001]
    for client in (single, sentinel, cluster):
        await client.aclose()


def test_only_single_mode_without_a_url_embeds_a_redis():
    assert wants_embedded(_redis({}), None)
    assert connect(_redis({})) is None
    assert not wants_embedded(_redis({}), "redis://h:6379/0")
    assert not wants_embedded(_redis({"mode": "cluster", "cluster_nodes": ["h:7000"]}), None)
