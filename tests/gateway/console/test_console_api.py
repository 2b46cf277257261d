"""The console's JSON endpoints against an in-process gateway in front of fake upstreams, on
the shared Redis: who may open it, that its figures are /metrics' and the ledger's own, what
the per-minute rollup counts, and that no key, key hash or (by default) prompt text leaks."""
from __future__ import annotations

import base64
import json

import pytest

from gateway.console import promtext
from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for

ADMIN, TENANT_KEY = "sk-console-admin", "sk-console-acme"
SECRET_PROMPT = "the quick zebra named Ophelia"
VIEWS = ("/console/api/overview", "/console/api/routing", "/console/api/quality", "/console/api/workers")


def _basic(key: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"admin:{key}".encode()).decode()}


def _bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def _doc(urls, prefix, tmp_path, tenants=True, **console) -> dict:
    doc = base_config([tier("small", 1, [urls[0]], price=(0.1, 0.2)), tier("large", 3, [urls[1]], price=(3.0, 6.0))],
                      prefix, console=console)
    if tenants:
        doc["policy"] = {"admin_key_sha256": hash_key(ADMIN), "usage_log": {"dir": str(tmp_path / "logs")}}
        doc["tenants"] = {"acme": {"keys": [{"id": "k1", "sha256": hash_key(TENANT_KEY)}]}}
    return doc


async def _traffic(http, url: str) -> dict[str, int]:
    """Mixed requests; returns how many each tier served (the prompt-length classifier: short -> small)."""
    chats = [("auto", SECRET_PROMPT, False), ("auto", "x" * 1200, False), ("large", "hello", True),
             ("small", "hi", False)]
    for model, content, stream in chats:
        body = {"model": model, "messages": [{"role": "user", "content": content}], "stream": stream}
        async with http.post(url + "/v1/chat/completions", json=body, headers=_bearer(TENANT_KEY)) as r:
            assert r.status == 200, await r.text()
            await r.read()
    async with http.post(url + "/v1/completions", json={"model": "auto", "prompt": "one two"},
                         headers=_bearer(TENANT_KEY)) as r:
        assert r.status == 200
    async with http.post(url + "/v1/chat/completions", json={"model": "auto"}, headers=_bearer(TENANT_KEY)) as r:
        assert r.status == 400  # counted as an error, never served
    return {"small": 3, "large": 2}


async def _get(http, url: str, path: str, headers: dict) -> dict:
    async with http.get(url + path, headers=headers) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def test_console_needs_the_admin_key_when_tenants_are_configured(gateway, fakes, http, redis_prefix, tmp_path):
    urls = [u for _, u in await fakes(2)]
    gw = await gateway(_doc(urls, redis_prefix, tmp_path))
    for path in ("/console", "/console/static/console.js", *VIEWS):
        for headers in ({}, _bearer(TENANT_KEY), _basic(TENANT_KEY), _basic("wrong"), {"Authorization": "Basic !!"}):
            async with http.get(gw.url + path, headers=headers) as r:
                assert r.status == 401, (path, headers)
                assert r.headers["WWW-Authenticate"].startswith("Basic ")
                assert (await r.json())["error"]["code"] == "admin_required"
        for headers in (_bearer(ADMIN), _basic(ADMIN)):
            async with http.get(gw.url + path, headers=headers) as r:
                assert r.status == 200, (path, await r.text())
    async with http.post(gw.url + "/console/api/route", json={"prompt": "hi"}) as r:
        assert r.status == 401


async def test_console_is_open_on_a_gateway_without_tenants(gateway, fakes, http, redis_prefix, tmp_path):
    urls = [u for _, u in await fakes(2)]
    gw = await gateway(_doc(urls, redis_prefix, tmp_path, tenants=False))
    for path in ("/console", *VIEWS):
        async with http.get(gw.url + path) as r:
            assert r.status == 200, path
    overview = await _get(http, gw.url, "/console/api/overview", {})
    assert overview["ledger"] is None  # no tenants: no ledger to show


async def test_overview_figures_are_the_metrics_and_the_ledger(gateway, fakes, http, redis_prefix, tmp_path):
    urls = [u for _, u in await fakes(2)]
    gw = await gateway(_doc(urls, redis_prefix, tmp_path))
    served = await _traffic(http, gw.url)

    async def rollup_complete():
        o = await _get(http, gw.url, "/console/api/overview", _bearer(ADMIN))
        per_tier = {t: sum(o["per_minute"]["requests"][t]) for t in ("small", "large")}
        return o if per_tier == served else None

    overview = await wait_for(rollup_complete, timeout_s=15)
    async with http.get(gw.url + "/metrics", headers=_bearer(ADMIN)) as r:
        found = promtext.samples(await r.text())
    totals = overview["totals"]
    # the in-process registry is shared by every test in this process: compare with /metrics as a whole
    assert totals["spend_usd"] == pytest.approx(promtext.total(found, "tiergate_cost_usd_total"), abs=1e-12)
    assert totals["saved_usd"] == pytest.approx(promtext.total(found, "tiergate_cost_saved_usd_total"), abs=1e-12)
    assert totals["served_by_tier"] == {
        k: int(v) for k, v in promtext.by_label(found, "tiergate_routed_requests_total", "tier").items()}
    assert totals["errors_4xx"] == int(sum(v for labels, v in found["tiergate_requests_total"]
                                           if labels["status"].startswith("4")))
    # this test's own Redis prefix: the ledger and the rollup hold exactly this traffic
    async with http.get(gw.url + "/v1/usage?days=1", headers=_bearer(ADMIN)) as r:
        usage = await r.json()
    ledger_usd = sum(d["spend_usd"] for entry in usage["data"] for d in entry["days"])
    assert ledger_usd > 0 and overview["ledger"]["spend_usd"] == pytest.approx(ledger_usd, abs=1e-9)
    minute = overview["per_minute"]
    assert sum(minute["spend_usd"]) == pytest.approx(ledger_usd, abs=1e-9)
    assert sum(sum(v) for v in minute["reasons"].values()) == sum(served.values())
    assert sum(minute["reasons"]["classifier"]) == 3 and sum(minute["reasons"]["explicit"]) == 2


async def test_recent_decisions_hold_no_prompt_and_nothing_leaks_a_key(gateway, fakes, http, redis_prefix, tmp_path):
    urls = [u for _, u in await fakes(2)]
    gw = await gateway(_doc(urls, redis_prefix, tmp_path))
    await _traffic(http, gw.url)

    async def five_rows():
        rows = (await _get(http, gw.url, "/console/api/routing", _bearer(ADMIN)))["recent"]
        return rows if len(rows) == 5 else None

    rows = await wait_for(five_rows, timeout_s=15)
    assert all("prompt" not in row for row in rows)
    assert {row["tier"] for row in rows} == {"small", "large"} and {row["tenant"] for row in rows} == {"acme"}
    forbidden = [ADMIN, TENANT_KEY, hash_key(ADMIN), hash_key(TENANT_KEY), SECRET_PROMPT]
    for path in ("/console", "/console/static/console.js", *VIEWS):
        async with http.get(gw.url + path, headers=_basic(ADMIN)) as r:
            text = await r.text()
        assert not [s for s in forbidden if s in text], path


async def test_prompt_logging_keeps_prompts_for_the_explorer(gateway, fakes, http, redis_prefix, tmp_path):
    urls = [u for _, u in await fakes(2)]
    gw = await gateway(_doc(urls, redis_prefix, tmp_path, log_prompts=True))
    await _traffic(http, gw.url)

    async def logged():
        rows = (await _get(http, gw.url, "/console/api/routing", _bearer(ADMIN)))["recent"]
        return [r for r in rows if SECRET_PROMPT in r.get("prompt", "")] or None

    assert len(await wait_for(logged, timeout_s=15)) == 1


async def test_route_explanation_and_its_bad_input(gateway, fakes, http, redis_prefix, tmp_path):
    urls = [u for _, u in await fakes(2)]
    gw = await gateway(_doc(urls, redis_prefix, tmp_path))
    async with http.post(gw.url + "/console/api/route", json={"prompt": "y" * 1500, "tenant": "acme"},
                         headers=_basic(ADMIN)) as r:
        explained = await r.json()
    assert r.status == 200 and explained["tier"] == "large" and explained["routed_by"] == "classifier"
    assert explained["tenant"] == "acme" and [s["step"] for s in explained["steps"]][-1] == "chosen"
    for body, param in (({"prompt": ""}, "prompt"), ({"prompt": 3}, "prompt"), ({"prompt": "a", "model": 1}, "model"),
                        ({"prompt": "a", "tenant": "nobody"}, "tenant"), ({"prompt": "a", "model": "nope"}, "model")):
        async with http.post(gw.url + "/console/api/route", json=body, headers=_basic(ADMIN)) as r:
            error = (await r.json())["error"]
        assert 400 <= r.status < 500 and error["param"] == param, (body, r.status, error)
    async with http.post(gw.url + "/console/api/route", data=b"{not json", headers=_basic(ADMIN)) as r:
        assert r.status == 400


async def test_workers_view_reads_what_each_upstream_exposes(gateway, fakes, http, redis_prefix, tmp_path):
    urls = [u for _, u in await fakes(2)]
    gw = await gateway(_doc(urls, redis_prefix, tmp_path))
    view = await _get(http, gw.url, "/console/api/workers", _bearer(ADMIN))
    rows = {row["url"]: row for row in view["workers"]}
    assert set(rows) == set(urls)
    assert rows[urls[0]]["tiers"] == ["small"] and rows[urls[1]]["tiers"] == ["large"]
    # a fake upstream publishes a worker's queue gauges (idle: 0) but no latency histograms
    assert all(row["healthy"] is True and row["metrics_read"] is True and row["running"] == 0
               and row["ttft_ms_p50"] is None and row["breaker"] == "closed" for row in rows.values())
    json.dumps(view)  # plain JSON all the way down


async def test_views_answer_503_not_500_when_redis_is_gone(gateway, fakes, http, own_redis, tmp_path):
    port, _, procs = own_redis
    urls = [u for _, u in await fakes(2)]
    doc = _doc(urls, "tgconsole:", tmp_path, tenants=False)
    doc["redis"] = {"url": f"redis://127.0.0.1:{port}/0", "key_prefix": "tgconsole:", "socket_timeout_s": 0.5}
    gw = await gateway(doc)
    assert (await _get(http, gw.url, "/console/api/overview", {}))["per_minute"] is not None
    procs[0].kill()
    procs[0].wait()
    for path in ("/console/api/overview", "/console/api/routing", "/console/api/quality"):
        async with http.get(gw.url + path) as r:
            body = await r.json()
        assert r.status == 503 and body["error"]["code"] == "store_unavailable", (path, r.status, body)
    assert (await _get(http, gw.url, "/console/api/workers", {}))["workers"]  # needs no Redis
