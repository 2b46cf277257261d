"""Must show 2: the Cost dashboard's key queries, evaluated by a real Prometheus after a scripted
workload, give the gateway's own usage ledger (`GET /v1/usage`) to the cent (in fact to the
micro-dollar: both use the ledger's rounding).

A gateway with two processes (multiprocess metrics) and the example tenants sits in front of fake
OpenAI upstreams (this is about the gateway's accounting, not the models). One tier has a dead
worker next to a live one (failover), one has only a dead worker (escalation), team-b has a tiny
soft budget (policy downgrades) and team-a pinned routes.

Prometheus: the `prometheus` binary (Debian package, installed by `make setup`; the test fails
without it). The same figures are also computed from the gateway's /metrics with the Prometheus
text parser.
"""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
import uuid
from collections import defaultdict
from pathlib import Path

import aiohttp
import openai
import pytest
import redis
import yaml

from tests.dashboards.dash_helpers import ROOT, Prometheus, dashboards, prometheus_binary, substitute
from tests.support.metrics import samples
from dashboards import cost
from dashboards.promql import dashboard_exprs
from dashboards.scrape_config import render
from launcher import commands
from launcher.group import clean_env
from tests.support import SHARED_REDIS, Pending, free_port, start_fake, wait_for
from policies.costs import request_cost_micro, tier_price
from tests.support.kinds import starts_processes

KEYS = {"team-a": "sk-team-a-example", "team-b": "sk-team-b-example", None: None}  # None: anonymous "local"
ADMIN_KEY = "sk-admin-example"
PRICES = {"small": (1.234567, 2.345678), "medium": (5.5, 11.25), "large": (25.000001, 99.99),
          "expert": (100.123456, 300.654321)}
CHUNKS = 250  # completion tokens per fake answer


def _config(tmp: Path, live: str, failing: str, dead: str, prefix: str) -> dict:
    doc = yaml.safe_load((ROOT / "policies" / "examples" / "tiergate-tenants.yaml").read_text())
    # medium: each gateway process's first pick there is the failing worker (the pool rotates
    # from the second entry), so failover happens; large: only a dead worker, so escalation.
    workers = {"small": [live], "medium": [live, failing], "large": [dead], "expert": [live]}
    for tier in doc["tiers"]:
        tier["workers"] = [{"url": u} for u in workers[tier["name"]]]
        tier["price_per_mtok"] = dict(zip(("input", "output"), PRICES[tier["name"]]))
    doc["redis"] = {"url": SHARED_REDIS, "key_prefix": prefix}
    doc["health"] = {"interval_s": 0.5, "timeout_s": 5.0}
    doc["policy"]["usage_log"] = {"dir": str(tmp / "usage"), "fsync": "never"}
    doc["tenants"]["team-b"]["budgets"]["daily_usd"] = {"soft": 0, "hard": 5}  # always over: downgrades
    doc["tenants"]["local"]["max_tier"] = "expert"  # large's escalation to expert stays inside local's policy
    return doc


def _workload() -> list[tuple[str | None, str, str, bool]]:
    """(tenant, model, endpoint, stream): auto, explicit, pinned, downgraded, escalated, failed-over."""
    jobs = []
    for i in range(3):
        jobs += [("team-a", "auto", "chat", i == 0), ("team-a", "fast", "chat", False), ("team-a", "best", "chat", True),
                 ("team-a", "medium", "chat", False), ("team-b", "auto", "chat", i == 1), ("team-b", "medium", "chat", True),
                 (None, "large", "completion", False), (None, "auto", "completion", i == 2),
                 (None, "small", "completion", i == 0)]
    return jobs


async def _one(clients: dict, tenant, model: str, endpoint: str, stream: bool, n: int) -> None:
    client = clients[tenant]
    headers = {} if tenant else {"Authorization": openai.Omit()}  # no key: the anonymous tenant
    prompt = f"request {n}: " + "explain the trade-offs of caching " * (1 + n % 5)
    if endpoint == "chat":
        result = await client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                                      stream=stream, extra_headers=headers)
    else:
        result = await client.completions.create(model=model, prompt=prompt, stream=stream, extra_headers=headers)
    if stream:
        async for _ in result:
            pass


def _ledger(usage: dict) -> dict:
    """Figures from the admin's /v1/usage: per tenant, and per (tenant, tier)."""
    out = {"spend": {}, "cost": defaultdict(int), "requests": defaultdict(int), "in": defaultdict(int),
           "out": defaultdict(int)}
    for report in usage["data"]:
        tenant = report["tenant"]
        out["spend"][tenant] = report["month_spend_micro_usd"]
        for day in report["days"]:
            for tier, t in day["tiers"].items():
                out["cost"][tenant, tier] += t["cost_micro"]
                out["requests"][tenant, tier] += t["requests"]
                out["in"][tenant, tier] += t["prompt_tokens"]
                out["out"][tenant, tier] += t["completion_tokens"]
    return out


def _counterfactual(usage_dir: Path) -> tuple[int, int]:
    """(actual, all-top-tier) micro-dollars, per request from the policies' own usage log."""
    top = tier_price({"price_per_mtok": dict(zip(("input", "output"), PRICES["expert"]))})
    actual = counterfactual = 0
    for path in usage_dir.glob("usage-*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            actual += record["cost_micro"]
            counterfactual += request_cost_micro(top, record["prompt_tokens"], record["completion_tokens"])
    return actual, counterfactual


def _by(rows, *labels) -> dict:
    out = defaultdict(float)
    for row_labels, value in rows:
        out[tuple(row_labels[label] for label in labels) if len(labels) > 1 else row_labels[labels[0]]] += value
    return out


def _assert_cents(actual_usd: float, ledger_micro: int, what: str) -> None:
    assert round(actual_usd, 2) == round(ledger_micro / 1e6, 2), f"{what}: {actual_usd} vs ledger {ledger_micro} µ$"
    assert abs(actual_usd * 1e6 - ledger_micro) < 0.01, f"{what}: {actual_usd} vs ledger {ledger_micro} µ$"


def _check_against_ledger(figures: dict, ledger: dict, source: str) -> None:
    for tenant, micro in ledger["spend"].items():
        _assert_cents(figures["spend"].get(tenant, 0.0), micro, f"{source} spend of {tenant}")
    for key, micro in ledger["cost"].items():
        _assert_cents(figures["cost"].get(key, 0.0), micro, f"{source} cost {key}")
    for name in ("requests", "in", "out"):
        got = {k: round(v) for k, v in figures[name].items() if v}
        assert got == {k: v for k, v in ledger[name].items() if v}, f"{source} {name}"


def _metrics_figures(page: str) -> dict:
    cost_rows = samples(page, "tiergate_cost_usd_total")
    tokens = samples(page, "tiergate_tokens_total")
    return {"spend": _by(cost_rows, "tenant"), "cost": _by(cost_rows, "tenant", "tier"),
            "requests": _by(samples(page, "tiergate_routed_requests_total"), "tenant", "tier"),
            "in": _by([(labels, v) for labels, v in tokens if labels["direction"] == "in"], "tenant", "tier"),
            "out": _by([(labels, v) for labels, v in tokens if labels["direction"] == "out"], "tenant", "tier"),
            "saved": sum(v for _, v in samples(page, "tiergate_cost_saved_usd_total")),
            "top": sum(v for _, v in samples(page, "tiergate_cost_top_tier_usd_total")),
            "month_spend": _by([(labels, v) for labels, v in samples(page, "tiergate_tenant_spend_usd") if labels["period"] == "month"],
                               "tenant")}


def _panel_exprs(title: str) -> list[str]:
    panel = next(p for p in dashboards()["tiergate-cost.json"]["panels"] if p["title"] == title)
    return [t["expr"] for t in panel["targets"]]


async def _prometheus_figures(prom: Prometheus, session, at: float, range_s: int) -> dict:
    async def rows(expr: str) -> list[tuple[dict, float]]:
        return [(r["metric"], float(r["value"][1])) for r in await prom.query(session, substitute(expr, range_s), at)]

    async def scalar(title: str) -> float:
        (_, value), = await rows(_panel_exprs(title)[0])
        return value

    spend_cost, requests, tokens_in, tokens_out = [await rows(e) for e in _panel_exprs(cost.SPEND_TABLE)]
    return {"spend": _by(await rows(_panel_exprs(cost.TOP_TENANTS)[0]), "tenant"),
            "cost": _by(spend_cost, "tenant", "tier"), "requests": _by(requests, "tenant", "tier"),
            "in": _by(tokens_in, "tenant", "tier"), "out": _by(tokens_out, "tenant", "tier"),
            "total": await scalar(cost.SPEND_IN_RANGE), "saved": await scalar(cost.SAVED_IN_RANGE),
            "saved_pct": await scalar(cost.SAVED_PERCENT), "per_1k": await scalar(cost.COST_PER_1K),
            "burn": await rows(_panel_exprs(cost.BUDGET_BURN)[1])}


@pytest.fixture
@starts_processes
async def running(tmp_path):
    """Fake upstream + two-process gateway (+ Prometheus when available); yields a namespace."""
    fake, runner, live = await start_fake(name="fake-live", chunks=CHUNKS)
    failing, failing_runner, failing_url = await start_fake(name="fake-failing")
    failing.fail_status = 500
    prefix = f"tgdash:{uuid.uuid4().hex[:8]}:"
    port = free_port()
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(_config(tmp_path, live, failing_url, f"http://127.0.0.1:{free_port()}", prefix)))
    gateway = subprocess.Popen(commands.gateway_processes(config, port, workers=2), cwd=ROOT, env=clean_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scrape = tmp_path / "prometheus.yml"
    (tmp_path / "admin.key").write_text(ADMIN_KEY)  # per-tenant series need the admin key
    scrape.write_text(render(f"127.0.0.1:{port}", [live.removeprefix("http://")], interval_s=1,
                             admin_key_file=str(tmp_path / "admin.key")))
    prom = Prometheus(prometheus_binary(), scrape, tmp_path / "tsdb", free_port())
    try:
        yield type("Running", (), {"url": f"http://127.0.0.1:{port}", "prom": prom, "usage_dir": tmp_path / "usage",
                                   "gateway": gateway})
    finally:
        prom.close()
        gateway.send_signal(signal.SIGTERM)
        try:
            gateway.wait(timeout=15)
        except subprocess.TimeoutExpired:
            gateway.kill()
            gateway.wait()
        await runner.cleanup()
        await failing_runner.cleanup()
        client = redis.Redis.from_url(SHARED_REDIS)
        keys = list(client.scan_iter(match=prefix + "*", count=500))
        if keys:
            client.delete(*keys)
        client.close()


async def _wait_healthy(session, url: str, proc, timeout_s: float = 60) -> None:
    async def healthy() -> bool:
        assert proc.poll() is None, "gateway exited"
        try:
            async with session.get(url + "/health") as response:
                return response.status == 200
        except aiohttp.ClientError:
            return False

    await wait_for(healthy, timeout_s, 0.2, what="gateway healthy")


async def _settled_usage(session, url: str, expected_requests: int) -> dict:
    """The admin's /v1/usage once every request is settled (streams settle just after their last byte)."""
    def breakdown(usage: dict) -> dict:
        return {(r["tenant"], d["date"], tier): t["requests"] for r in usage["data"] for d in r["days"]
                for tier, t in d["tiers"].items()}

    async def settled():
        async with session.get(url + "/v1/usage?days=2", headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as response:
            assert response.status == 200, await response.text()
            usage = await response.json()
        return usage if sum(breakdown(usage).values()) >= expected_requests else Pending(breakdown(usage))

    usage = await wait_for(settled, 10, 0.1, what=f"{expected_requests} settled requests by (tenant, day, tier)")
    assert sum(breakdown(usage).values()) == expected_requests, \
        f"settled requests by (tenant, day, tier): {breakdown(usage)}"
    return usage


async def test_cost_queries_match_the_usage_ledger(running):
    async with aiohttp.ClientSession() as session:
        await _wait_healthy(session, running.url, running.gateway)
        await running.prom.wait_ready(session)
        await wait_for(lambda: running.prom.last_scrape(session, "tiergate-gateway"), timeout_s=30)  # series at 0 first
        started = time.time()
        jobs = _workload()
        clients = {t: openai.AsyncOpenAI(base_url=running.url + "/v1", api_key=key or "none", max_retries=0, timeout=30)
                   for t, key in KEYS.items()}
        for batch in range(0, len(jobs), 6):
            await asyncio.gather(*(_one(clients, *job, n) for n, job in enumerate(jobs[batch:batch + 6], batch)))
        for client in clients.values():
            await client.close()
        usage = await _settled_usage(session, running.url, len(jobs))
        ledger = _ledger(usage)
        actual_micro, top_micro = _counterfactual(running.usage_dir)
        assert actual_micro == sum(ledger["spend"].values()) > 0 and top_micro > actual_micro

        async with session.get(running.url + "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as response:
            page = await response.text()
        parsed = _metrics_figures(page)
        _check_against_ledger(parsed, ledger, "/metrics")
        _assert_cents(parsed["saved"], top_micro - actual_micro, "/metrics saved")
        _assert_cents(parsed["top"], top_micro, "/metrics all-top-tier cost")
        for tenant, micro in ledger["spend"].items():
            if micro:
                _assert_cents(parsed["month_spend"][tenant], micro, f"/metrics ledger spend gauge {tenant}")
        reasons = {labels["reason"] for labels, v in samples(page, "tiergate_routed_requests_total") if v}
        assert {"explicit", "pinned", "policy_downgrade", "escalation", "failover"} <= reasons  # "classifier": see
        # test_dashboard_metrics_live (here the ONNX classifier's levels meet clamps and dead tiers)

        done = time.time()

        async def scraped_since() -> float:
            at = await running.prom.last_scrape(session, "tiergate-gateway")
            return at if at > done else 0.0

        at = await wait_for(scraped_since, timeout_s=30)
        figures = await _prometheus_figures(running.prom, session, at, int(at - started) + 120)
        _check_against_ledger(figures, ledger, "Prometheus")
        _assert_cents(figures["total"], actual_micro, "Prometheus spend in range")
        _assert_cents(figures["saved"], top_micro - actual_micro, "Prometheus saved")
        assert figures["saved_pct"] == pytest.approx(100 * (top_micro - actual_micro) / top_micro, abs=1e-6)
        assert figures["per_1k"] == pytest.approx(1000 * actual_micro / 1e6 / len(jobs), abs=1e-9)
        budgets = {"team-a": 500, "team-b": 500, "local": 500}  # monthly hard budgets of the example config
        burn = {row["tenant"]: value for row, value in figures["burn"]}
        for tenant, micro in ledger["spend"].items():
            assert burn[tenant] == pytest.approx(100 * micro / 1e6 / budgets[tenant], abs=1e-9)
        for name, dashboard in dashboards().items():  # every query of every dashboard is valid PromQL
            for where, expr in dashboard_exprs(dashboard):
                await running.prom.query(session, substitute(expr, 3600), at)
