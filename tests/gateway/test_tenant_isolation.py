"""Tenants see nothing of each other (issue 56, finding 3 and 4): a tenant's /v1/route cannot tell a
prefix another tenant sent from one nobody sent, each tenant's requests reach the workers with a
cache salt of its own that no client can set, and worker addresses are for the admin key only."""
from __future__ import annotations

import uuid

import pytest

from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier

ADMIN = "sk-admin-" + uuid.uuid4().hex
KEYS = {name: f"sk-{name}-" + uuid.uuid4().hex for name in ("alpha", "beta")}
SYSTEM = "You are the private assistant of the alpha team; never reveal the launch codes. " * 8


def _doc(urls: list[str], prefix: str, tmp_path, **affinity) -> dict:
    doc = base_config([tier("t", 1, urls)], prefix, affinity=affinity) if affinity else \
        base_config([tier("t", 1, urls)], prefix)
    doc.update({"policy": {"admin_key_sha256": hash_key(ADMIN), "usage_log": {"dir": str(tmp_path / "usage")}},
                "tenants": {name: {"keys": [{"id": "k", "sha256": hash_key(key)}]} for name, key in KEYS.items()}})
    return doc


def _chat(system: str, question: str = "hello") -> dict:
    return {"model": "t", "max_tokens": 4,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]}


async def _post(http, gw, path: str, body: dict, key: str) -> tuple[int, dict, dict]:
    async with http.post(gw.url + path, json=body, headers={"Authorization": f"Bearer {key}"}) as r:
        return r.status, dict(r.headers), await r.json(content_type=None) if not body.get("stream") else await r.text()


async def _seen_by_alpha(http, gw):
    status, _, _ = await _post(http, gw, "/v1/chat/completions", _chat(SYSTEM), KEYS["alpha"])
    assert status == 200
    await gw.state.services.upstreams.affinity.drain()  # the index write is off the hot path


async def test_a_tenant_cannot_tell_another_tenants_prefix_from_an_unseen_one(fakes, gateway, redis_prefix,
                                                                               http, tmp_path):
    (_, a), (_, b) = await fakes(2)
    gw = await gateway(_doc([a, b], redis_prefix, tmp_path))
    await _seen_by_alpha(http, gw)
    unseen = SYSTEM.replace("alpha", "gamma")
    answers = {}
    for name, system in (("seen", SYSTEM), ("unseen", unseen)):
        status, _, about = await _post(http, gw, "/v1/route", _chat(system, "other"), KEYS["beta"])
        assert status == 200
        answers[name] = about["affinity"]
    assert answers == {"seen": "none", "unseen": "none"}
    _, _, own = await _post(http, gw, "/v1/route", _chat(SYSTEM, "other"), KEYS["alpha"])
    assert own["affinity"] == "hit"  # a tenant still finds its own prefixes


async def test_global_scope_shares_prefixes_and_withholds_the_outcome_from_tenants(fakes, gateway, redis_prefix,
                                                                                  http, tmp_path):
    (_, a), (_, b) = await fakes(2)
    gw = await gateway(_doc([a, b], redis_prefix, tmp_path, scope="global"))
    await _seen_by_alpha(http, gw)
    _, _, beta = await _post(http, gw, "/v1/route", _chat(SYSTEM, "other"), KEYS["beta"])
    _, _, admin = await _post(http, gw, "/v1/route", _chat(SYSTEM, "other"), ADMIN)
    assert beta["affinity"] == "withheld" and admin["affinity"] == "hit"


async def test_each_tenant_gets_a_cache_salt_of_its_own_that_no_client_can_set(fakes, gateway, redis_prefix,
                                                                              http, tmp_path):
    ((fake, url),) = await fakes(1)
    gw = await gateway(_doc([url], redis_prefix, tmp_path))
    salts = {}
    for name in ("alpha", "beta", "alpha"):
        status, _, _ = await _post(http, gw, "/v1/chat/completions", _chat(SYSTEM), KEYS[name])
        assert status == 200
        salts.setdefault(name, set()).add(fake.seen[-1]["body"]["cache_salt"])
    assert len(salts["alpha"]) == 1 and len(salts["beta"]) == 1 and salts["alpha"] != salts["beta"]
    assert all(name not in salt for name, (salt,) in salts.items())  # derived under a secret, not the name
    served = len(fake.seen)
    forged = dict(_chat(SYSTEM), cache_salt=next(iter(salts["alpha"])))
    status, _, error = await _post(http, gw, "/v1/chat/completions", forged, KEYS["beta"])
    assert status == 400 and error["error"]["param"] == "cache_salt" and len(fake.seen) == served


async def test_global_scope_sends_no_salt(fakes, gateway, redis_prefix, http, tmp_path):
    ((fake, url),) = await fakes(1)
    gw = await gateway(_doc([url], redis_prefix, tmp_path, scope="global"))
    status, _, _ = await _post(http, gw, "/v1/chat/completions", _chat(SYSTEM), KEYS["alpha"])
    assert status == 200 and "cache_salt" not in fake.seen[-1]["body"]


@pytest.mark.parametrize("stream", [False, True])
async def test_worker_addresses_are_for_the_admin_key_only(fakes, gateway, redis_prefix, http, tmp_path, stream):
    ((_, url),) = await fakes(1)
    down = "http://127.0.0.1:9"  # nothing listens there: its error names the worker
    doc = _doc([url], redis_prefix, tmp_path)
    doc["tiers"].append(tier("broken", 2, [down]))
    gw = await gateway(doc)
    addresses = [u.removeprefix("http://") for u in (url, down)]
    seen = []
    status, headers, _ = await _post(http, gw, "/v1/chat/completions", dict(_chat("hi"), stream=stream), KEYS["beta"])
    assert status == 200 and headers["x-tiergate-backend"] == "t-1"
    seen.append(str(headers))
    status, headers, error = await _post(http, gw, "/v1/chat/completions", dict(_chat("hi"), model="broken"),
                                         KEYS["beta"])
    assert status == 503
    seen += [str(headers), str(error)]
    status, _, about = await _post(http, gw, "/v1/route", _chat("hi"), KEYS["beta"])
    assert about["backend"] == "t-1"
    seen.append(str(about))
    async with http.get(gw.url + "/metrics") as r:
        seen.append(await r.text())
    assert not [text for text in seen for address in addresses if address in text]
    _, _, admin = await _post(http, gw, "/v1/route", _chat("hi"), ADMIN)
    assert admin["backend"] == url
