"""With tenants, what the operator sees is the admin key's: /health answers liveness to anyone
(k8s probes) but names its workers only to the admin key, /metrics leaves out every per-tenant
series without it, the admin endpoints refuse other keys, and a reload may not drop the tenants
of a gateway that listens on a reachable address."""
from __future__ import annotations

import uuid

import pytest
import yaml

from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support.metrics import metric
from tests.support.scripted_transport import ScriptedTransport, worker

ADMIN = "sk-admin-" + uuid.uuid4().hex
TENANT = "sk-tenant-" + uuid.uuid4().hex


def _bearer(key: str | None) -> dict:
    return {"Authorization": f"Bearer {key}"} if key else {}


@pytest.fixture
async def gw(gateway, redis_prefix, tmp_path):
    url = "http://worker.test"  # played by the scripted transport: no socket on the worker's side
    doc = base_config([tier("small", 1, [url])], redis_prefix)
    doc.update({"policy": {"admin_key_sha256": hash_key(ADMIN), "usage_log": {"dir": str(tmp_path / "usage")}},
                "tenants": {"t": {"keys": [{"id": "main", "sha256": hash_key(TENANT)}]}}})
    gw = await gateway(doc, transport=ScriptedTransport(worker))
    gw.doc, gw.backend = doc, url
    return gw


async def test_health_names_workers_only_to_the_admin_key(gw, http):
    for key in (None, TENANT, "sk-wrong"):
        async with http.get(gw.url + "/health", headers=_bearer(key)) as r:
            assert r.status == 200 and await r.json() == {"status": "ok"}, key
    async with http.get(gw.url + "/health", headers=_bearer(ADMIN)) as r:
        assert r.status == 200 and gw.backend in (await r.json())["backends"]


async def test_per_tenant_series_need_the_admin_key(gw, http):
    async with http.post(gw.url + "/v1/chat/completions", headers=_bearer(TENANT),
                         json={"model": "small", "messages": [{"role": "user", "content": "hi"}]}) as r:
        assert r.status == 200
    async with http.get(gw.url + "/metrics", headers=_bearer(TENANT)) as r:
        page = await r.text()
    assert r.status == 200 and "tiergate_overhead_seconds" in page and 'tenant="' not in page
    async with http.get(gw.url + "/metrics", headers=_bearer(ADMIN)) as r:
        page = await r.text()
    assert metric(page, "tiergate_requests_total", tenant="t", tier="small", status="200") >= 1


@pytest.mark.parametrize("method, path", [("POST", "/admin/router/outcomes"), ("POST", "/admin/classifier/reload"),
                                          ("GET", "/v1/quality"), ("GET", "/console/api/overview")])
async def test_admin_endpoints_refuse_other_keys(gw, http, method, path):
    for key, status in ((None, 401), (TENANT, 403 if not path.startswith("/console") else 401)):
        async with http.request(method, gw.url + path, headers=_bearer(key), data=b'{"x": 1}\n') as r:
            assert r.status == status and "error" in await r.json(), (path, key)


async def test_a_reload_may_not_drop_the_tenants_of_a_reachable_gateway(gw):
    gw.state.keys_required = True  # what gateway.process sets when it listens on a non-loopback address
    policy = gw.state.services.sinks.policy
    keyless = {k: v for k, v in gw.doc.items() if k not in ("tenants", "policy")}
    gw.path.write_text(yaml.safe_dump(keyless))
    assert gw.state.reload() is False and gw.state.services.sinks.policy is policy
    # an admin key alone keeps keys required: it manages tenants and keys through /admin/
    gw.path.write_text(yaml.safe_dump({**keyless, "policy": {"admin_key_sha256": gw.doc["policy"]["admin_key_sha256"]}}))
    assert gw.state.reload() is True and gw.state.services.sinks.policy is not policy
