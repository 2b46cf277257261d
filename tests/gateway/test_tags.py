"""Cost by tag through the gateway: tags from `metadata.tags` and `x-tiergate-tags`, kept when the
tenant's allowed_tags names them (others dropped and counted), in the usage log, in
/v1/usage?group_by=tag, in tiergate_tag_spend_usd_total, and rebuilt by rebuild-ledger; a
malformed or oversized tag set is a 400 naming the field, and metadata never reaches a worker."""
from __future__ import annotations

import glob
import json
import uuid

import pytest

from policies.keys import hash_key
from policies.rebuild import rebuild_ledger
from policies.store import PolicyStore
from tests.gateway.gw_helpers import base_config, tier
from tests.support.metrics import metric
from tests.support.scripted_transport import ScriptedTransport, worker

ADMIN = "sk-admin-" + uuid.uuid4().hex
TENANT = "sk-tenant-" + uuid.uuid4().hex


def _bearer(key: str, tags: str | None = None) -> dict:
    return {"Authorization": f"Bearer {key}", **({"x-tiergate-tags": tags} if tags else {})}


@pytest.fixture
async def gw(gateway, redis_prefix, tmp_path):
    url = "http://worker.test"  # played by the scripted transport: no socket on the worker's side
    doc = base_config([tier("small", 1, [url])], redis_prefix)
    doc.update({"policy": {"admin_key_sha256": hash_key(ADMIN), "usage_log": {"dir": str(tmp_path / "usage")}},
                "tenants": {"t": {"keys": [{"id": "main", "sha256": hash_key(TENANT)}],
                                  "allowed_tags": ["search", "chat-ui", "team:a"]}}})
    transport = ScriptedTransport(worker)
    gw = await gateway(doc, transport=transport)
    gw.transport, gw.logs, gw.prefix = transport, tmp_path / "usage", redis_prefix
    return gw


def _chat(**extra) -> dict:
    return {"model": "small", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4, **extra}


async def _usage_by_tag(http, url: str) -> dict:
    async with http.get(url + "/v1/usage?days=1&group_by=tag", headers=_bearer(TENANT)) as r:
        assert r.status == 200
        return (await r.json())["days"][0]["tags"]


async def test_tags_are_kept_as_allowed_and_counted_by_tag(gw, http):
    sent = [(_chat(metadata={"tags": "search,unknown"}), "team:a"), (_chat(metadata={"tags": ["search"]}), None),
            (_chat(), "chat-ui, other")]
    for body, header in sent:
        async with http.post(gw.url + "/v1/chat/completions", json=body, headers=_bearer(TENANT, header)) as r:
            assert r.status == 200, await r.text()
    chats = [sent.json for sent in gw.transport.sent if sent.method == "POST"]
    assert len(chats) == 3 and all("metadata" not in body for body in chats)  # never forwarded
    tags = await _usage_by_tag(http, gw.url)
    assert set(tags) == {"search", "team:a", "chat-ui"}
    assert tags["search"]["requests"] == 2 and tags["team:a"]["requests"] == 1 and tags["chat-ui"]["requests"] == 1
    records = [json.loads(line) for path in glob.glob(str(gw.logs / "usage-*.jsonl")) for line in open(path)]
    assert sorted(map(tuple, (r["tags"] for r in records))) == [("chat-ui",), ("search",), ("search", "team:a")]
    async with http.get(gw.url + "/metrics", headers=_bearer(ADMIN)) as r:
        page = await r.text()
    assert metric(page, "tiergate_tags_dropped_total", tenant="t") == 2  # unknown, other
    assert metric(page, "tiergate_tag_spend_usd_total", tenant="t", tag="search") > 0

    # the ledger's tag figures come back from the usage log
    before = await _usage_by_tag(http, gw.url)
    store = PolicyStore(gw.state.redis, gw.prefix, 60)
    await gw.state.redis.delete(store.keys.usage_tags_day("t", records[0]["day"]))
    assert await _usage_by_tag(http, gw.url) == {}
    await rebuild_ledger(store, glob.glob(str(gw.logs / "usage-*.jsonl")))
    assert await _usage_by_tag(http, gw.url) == before


@pytest.mark.parametrize("body, header, param", [
    (_chat(metadata={"user": "x"}), None, "metadata"),
    (_chat(metadata={"tags": 5}), None, "metadata.tags"),
    (_chat(metadata={"tags": "bad tag!"}), None, "metadata.tags"),
    (_chat(), "a" * 2000, "x-tiergate-tags"),
    (_chat(metadata={"tags": [f"t{i}" for i in range(17)]}), None, "metadata.tags"),
])
async def test_bad_tags_are_400s_naming_the_field(gw, http, body, header, param):
    async with http.post(gw.url + "/v1/chat/completions", json=body, headers=_bearer(TENANT, header)) as r:
        assert r.status == 400
        assert (await r.json())["error"]["param"] == param


async def test_group_by_must_be_tier_or_tag(gw, http):
    async with http.get(gw.url + "/v1/usage?group_by=model", headers=_bearer(TENANT)) as r:
        assert r.status == 400 and (await r.json())["error"]["param"] == "group_by"
