"""The `redis:` section picks the client: one server, a Sentinel group's master or a Cluster; the
launcher embeds a Redis only in single mode without a URL (`make run`)."""
from __future__ import annotations

import re

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import SentinelConnectionPool

from gateway.config import ConfigError, parse_config
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


@pytest.mark.parametrize("section, field", [
    ({"url": "redis://127.0.0.1:6379/0", "password": "hunter2"}, "redis.password"),
    ({"url": "redis://:hunter2@127.0.0.1:6379/0"}, "redis.url"),
    ({"url": "redis://127.0.0.1:6379/0", "password_env": "TIERGATE_TEST_UNSET_REDIS_PW"}, "redis.password_env"),
    ({"url": "redis://127.0.0.1:6379/0", "password_env": "not a name"}, "redis.password_env"),
    ({"url": "redis://127.0.0.1:6379/0", "password_file": "/nonexistent/redis.pw"}, "redis.password_file"),
    ({"url": "rediss://127.0.0.1:6379/0"}, "redis.url"),
    ({"url": "unix:///tmp/r.sock", "tls": {"enabled": True}}, "redis.tls"),
    ({"url": "redis://127.0.0.1:6379/0", "tls": {"enabled": True, "ca_file": "/nonexistent/ca.pem"}},
     "redis.tls.ca_file"),
    ({"url": "redis://127.0.0.1:6379/0", "tls": {"ca_file": __file__}}, "redis.tls.ca_file"),
])
def test_a_password_never_sits_in_the_config_and_bad_credentials_settings_name_their_field(section, field):
    with pytest.raises(ConfigError, match=re.escape(field)):
        _redis(section)


def test_password_from_env_or_file_reaches_every_mode_and_never_its_repr(tmp_path, monkeypatch):
    monkeypatch.setenv("TIERGATE_TEST_REDIS_PW", "from-env")
    (tmp_path / "pw").write_text("from-file\n")
    both = {"password_env": "TIERGATE_TEST_REDIS_PW", "password_file": str(tmp_path / "pw")}
    with pytest.raises(ConfigError, match="not both"):
        _redis({"url": "redis://h:1/0", **both})
    single = _redis({"url": "redis://h:1/0", "username": "gw", "password_env": "TIERGATE_TEST_REDIS_PW"})
    cluster = _redis({"mode": "cluster", "cluster_nodes": ["h:7000"], "password_file": str(tmp_path / "pw")})
    assert (single.username, single.password, cluster.password) == ("gw", "from-env", "from-file")
    assert "from-env" not in repr(single) and "from-file" not in repr(cluster)


async def test_credentials_and_tls_go_to_every_connection_of_every_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("TIERGATE_TEST_REDIS_PW", "pw")
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a connection is made")
    auth = {"username": "gw", "password_env": "TIERGATE_TEST_REDIS_PW", "tls": {"enabled": True, "ca_file": str(ca)}}
    single = connect(_redis({"url": "redis://127.0.0.1:6379/0", **auth}))
    sentinel = connect(_redis({"mode": "sentinel", "sentinels": ["127.0.0.1:26379"], "master_name": "tg", **auth}))
    cluster = connect(_redis({"mode": "cluster", "cluster_nodes": ["127.0.0.1:7000"], **auth}))
    expected = {"username": "gw", "password": "pw", "ssl_ca_certs": str(ca), "ssl_cert_reqs": "required"}
    pools = [single.connection_pool, sentinel.connection_pool, sentinel.connection_pool.sentinel_manager.sentinels[0]
             .connection_pool]
    for pool in pools:
        assert expected.items() <= pool.connection_kwargs.items() and pool.connection_class.__name__.endswith(
            "SSLConnection"), pool.connection_kwargs
    node = next(iter(cluster.nodes_manager.startup_nodes.values()))
    assert expected.items() <= node.connection_kwargs.items() and node.connection_class.__name__ == "SSLConnection"
    for client in (single, sentinel, cluster):
        await client.aclose()
