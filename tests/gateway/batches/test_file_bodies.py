"""File bodies on disk: paths only from the gateway's own ids and a safe tenant folder, the sweep
removes what no metadata can still name, and a file kept in Redis before bodies moved to disk
is served and moved there on first use."""
from __future__ import annotations

import json
import os
import time

import pytest
import redis.asyncio as aioredis

from gateway.batches.bodies import FileBodies, tenant_folder
from gateway.batches.files import FileStore
from tests.support import SHARED_REDIS


def test_paths_come_from_gateway_ids_and_a_safe_tenant_folder(tmp_path):
    bodies = FileBodies(tmp_path)
    assert tenant_folder("acme") == "t-acme" and tenant_folder("a.b") == "t-a.b"
    for odd in ("..", ".", "a/b", ""):
        assert tenant_folder(odd).startswith("h-") and "/" not in tenant_folder(odd)
    assert bodies.path("..", "file-" + "0" * 24).parent.parent == tmp_path
    for name in ("../x", "file-../../etc", "file-" + "0" * 24 + "/x", ".tmp-1"):
        with pytest.raises(ValueError):
            bodies.path("acme", name)


async def test_the_sweep_removes_old_bodies_and_abandoned_temporary_files(tmp_path):
    bodies = FileBodies(tmp_path)
    folder = tmp_path / "t-acme"
    folder.mkdir()
    old, new, temp = folder / ("file-" + "1" * 24), folder / ("file-" + "2" * 24), folder / ".tmp-abc"
    for path in (old, new, temp):
        path.write_bytes(b"x")
    an_hour_ago = time.time() - 3700
    os.utime(old, (an_hour_ago - 86400, an_hour_ago - 86400))
    os.utime(temp, (an_hour_ago, an_hour_ago))
    assert await bodies.sweep(older_than_s=86400) == 2
    assert [p.name for p in folder.iterdir()] == [new.name]


async def test_a_file_kept_in_redis_before_is_moved_to_disk_on_first_use(tmp_path, redis_prefix):
    client = aioredis.from_url(SHARED_REDIS)
    store = FileStore(client, redis_prefix, 3600, FileBodies(tmp_path))
    file_id = "file-" + "3" * 24
    await client.hset(f"{redis_prefix}file:{{acme}}:{file_id}", mapping={"meta": json.dumps({"id": file_id}),
                                                                     "content": b"old body\n"})
    assert await store.content("acme", file_id) == b"old body\n"
    assert await client.hkeys(f"{redis_prefix}file:{{acme}}:{file_id}") == [b"meta"]
    assert (tmp_path / "t-acme" / file_id).read_bytes() == b"old body\n"
    await client.aclose()
