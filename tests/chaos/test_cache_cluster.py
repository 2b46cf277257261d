"""The response cache on a Redis Cluster: each cache's scripts take keys of one slot, so a put, a
lookup (with its LRU touch), an eviction and a clear work for caches that live on different
masters, as they do on one server."""
from __future__ import annotations

import time

import pytest

from gateway.cache.store import CacheStore, scope_keys
from launcher.redis_topology import cluster_master_of, start_cluster
from tests.chaos.redis_modes_helpers import client_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    top = start_cluster(tmp_path_factory.mktemp("cache-cluster"))
    yield top
    top.stop()


async def test_caches_on_different_masters_put_read_evict_and_clear(cluster):
    prefix = f"cachecl{int(time.time())}:"
    scopes = []
    for i in range(40):  # two caches whose hash tags live on different masters
        scope = f"t:tenant{i}"
        if not scopes or cluster_master_of(cluster, "{" + scope + "}") != cluster_master_of(cluster, "{" + scopes[0] + "}"):
            scopes.append(scope)
        if len(scopes) == 2:
            break
    client = client_for(cluster, prefix)
    store = CacheStore(client)
    try:
        for scope in scopes:
            for n in range(3):
                stored, used, _ = await store.put(prefix, scope, f"k{n}", b"x" * 400, 60, 1000, "small" if n else "large")
                assert stored and used <= 1000
            assert await store.get(prefix, scope, "k0") is None  # evicted: the least recently used
            assert await store.get(prefix, scope, "k2") == b"x" * 400
        assert await store.clear(prefix, scopes[0], "small") == 2
        assert await store.used(prefix, scopes[0]) == (0, 0)
        assert (await store.used(prefix, scopes[1]))[0] == 2  # the other cache is whole
        _, index = scope_keys(prefix, scopes[1])
        assert [await client.exists(key) for key in index] == [1] * len(index)
    finally:
        await client.aclose()
