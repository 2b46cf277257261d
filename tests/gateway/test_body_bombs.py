"""A small compressed body that inflates to tens of MiB costs the gateway no more than its body
limit: a caller without a key is refused from its headers before any of the body is read, and
with a key the body is counted as it inflates and refused with a 413 at the limit. Memory is
the peak of Python's allocations (tracemalloc) in this process, which holds the gateway."""
from __future__ import annotations

import tracemalloc
import uuid

import pytest

from measure.bombs import json_bomb
from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier

KEY = "sk-bomb-" + uuid.uuid4().hex
LIMIT = 1 << 20
INFLATED = 60 << 20


@pytest.fixture
async def gw(fakes, gateway, redis_prefix, tmp_path):
    ((_, url),) = await fakes(1)
    doc = base_config([tier("small", 1, [url])], redis_prefix, limits={"max_body_bytes": LIMIT})
    doc.update({"policy": {"usage_log": {"dir": str(tmp_path / "usage")}},
                "tenants": {"t": {"keys": [{"id": "main", "sha256": hash_key(KEY)}]}}})
    return await gateway(doc)


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    return {encoding: json_bomb(INFLATED, encoding) for encoding in ("gzip", "deflate")}


async def _send(http, url: str, body: bytes, encoding: str, key: str | None,
                path: str = "/v1/chat/completions") -> tuple[int, dict, int]:
    """(status, error, peak bytes allocated while the gateway answered)."""
    headers = {"Content-Type": "application/json", "Content-Encoding": encoding}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    tracemalloc.start()
    try:
        async with http.post(url + path, data=body, headers=headers) as response:
            status, error = response.status, (await response.json())["error"]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return status, error, peak


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_bomb_with_a_key_is_413_at_the_limit(gw, http, bombs, encoding):
    status, error, peak = await _send(http, gw.url, bombs[encoding], encoding, KEY)
    assert status == 413 and error["code"] == "request_too_large", error
    assert str(LIMIT) in error["message"]
    assert peak < 2 * LIMIT, f"{peak} bytes allocated for a {len(bombs[encoding])}-byte {encoding} body"


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_bomb_without_a_key_is_refused_before_the_body_is_read(gw, http, bombs, encoding):
    status, error, peak = await _send(http, gw.url, bombs[encoding], encoding, None)
    assert status == 401 and error["code"] == "invalid_api_key", error
    assert peak < 2 * LIMIT, f"{peak} bytes allocated for a {len(bombs[encoding])}-byte {encoding} body"


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/messages", "/v1/route", "/v1/batches",
                                  "/admin/router/outcomes"])
async def test_every_endpoint_that_reads_a_body_checks_the_key_first(gw, http, bombs, path):
    status, _, peak = await _send(http, gw.url, bombs["gzip"], "gzip", None, path)
    assert status == 401 and peak < 2 * LIMIT, (path, status, peak)
    if path.startswith("/v1/") and path != "/v1/batches":  # the others answer a tenant key 404 or 403
        status, _, peak = await _send(http, gw.url, bombs["gzip"], "gzip", KEY, path)
        assert status == 413 and peak < 2 * LIMIT, (path, status, peak)


async def test_a_compressed_body_within_the_limit_is_served(gw, http):
    body = json_bomb(LIMIT // 2, "gzip")
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip", "Authorization": f"Bearer {KEY}"}
    async with http.post(gw.url + "/v1/chat/completions", data=body, headers=headers) as response:
        assert response.status == 200, await response.text()
