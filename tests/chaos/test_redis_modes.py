"""Gateways on a real Redis Cluster (3 masters, a replica each) and a real Sentinel group (master,
replica, 3 Sentinels), with a master SIGKILLed under load.

The rule tested (deploy/README.md, "Choosing Redis"): replication is asynchronous, so a failover
may lose the ledger writes the dead master acknowledged but had not yet passed on (its last
moment); requests meanwhile follow `policy.on_redis_error`; afterwards every request is served
and billed on the new master with no restart, and a reconcile from the usage logs
(`python -m gateway.rebuild_ledger --config`) makes the ledger exact."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone

import openai
import pytest

from launcher.redis_topology import cluster_master_of, sentinel_master, start_cluster, start_sentinel_group
from policies.rebuild import rebuild_ledger
from policies.store import PolicyStore
from policies.usage_log import read_records
from tests.chaos.redis_modes_helpers import (Load, LocalAdmitWatch, client_for, gateway_doc, key_of, ledger_spend,
                                             log_paths, log_spend)
from tests.support import wait_for

REPLICATION_WINDOW_S = 1.0  # what the rule allows lost: settles acknowledged this long before the kill


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    top = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield top
    top.stop()


@pytest.fixture(scope="module")
def sentinel_group(tmp_path_factory):
    top = start_sentinel_group(tmp_path_factory.mktemp("sentinel"))
    yield top
    top.stop()


def on_different_masters(top, stem: str, count: int) -> list[str]:
    """`count` tenant names whose hash tags are served by different masters."""
    names, masters = [], set()
    for i in range(500):
        master = cluster_master_of(top, f"{{{stem}{i}}}")
        if master not in masters:
            masters.add(master)
            names.append(f"{stem}{i}")
        if len(names) == count:
            return names
    raise AssertionError(f"fewer than {count} masters serve {stem}*")


def prefix() -> str:
    return f"tgmodes-{uuid.uuid4().hex[:8]}:"


async def test_cluster_two_gateways_keep_limits_exact_across_slots(cluster, fakes, gateway, http, tmp_path):
    (_, url), = await fakes(1)
    rate, budget = on_different_masters(cluster, "rate", 3), on_different_masters(cluster, "budget", 3)
    tenants = {**{t: {"rate_limits": {"requests_per_minute": 40}} for t in rate},
               **{t: {"budgets": {"daily_usd": {"hard": 0.002}}} for t in budget}}
    keys = prefix()
    gws = [await gateway(gateway_doc(cluster, url, keys, tmp_path / f"usage{i}", tenants, "closed", timeout_s=5))
           for i in range(2)]
    load = Load(http, [gw.url for gw in gws])
    order = [t for _ in range(70) for t in rate] + [t for _ in range(50) for t in budget]
    answers = dict(zip(range(len(order)), await load.burst(order, concurrency=200)))
    by_tenant = {t: [answers[i] for i, name in enumerate(order) if name == t] for t in tenants}
    for t in rate:
        assert [s for s, _ in by_tenant[t]].count(200) == 40, (t, [a for a in by_tenant[t] if a[0] != 429])  # exactly the limit
        assert {c for s, c in by_tenant[t] if s != 200} == {"rate_limit_exceeded"}
    store = PolicyStore(client_for(cluster, keys), keys, 60)
    paths = log_paths(tmp_path / "usage0", tmp_path / "usage1")
    month = datetime.now(timezone.utc).strftime("%Y-%m")
    ledger, logged = await ledger_spend(store, budget, month), log_spend(paths)
    for t in budget:
        assert {s for s, _ in by_tenant[t]} == {200, 429}, by_tenant[t]
        assert {c for s, c in by_tenant[t] if s != 200} == {"budget_exceeded"}
        served = [s for s, _ in by_tenant[t]].count(200)
        assert 0 < ledger[t] == logged[t]  # every cent counted once
        # within the hard budget but for the worker's prompt count passing the route's estimate (as on one Redis)
        assert ledger[t] <= 2000 + 20 * served, (ledger[t], served)
    await store.redis.aclose()


async def _settled(store: PolicyStore, records) -> list[str]:
    """Request ids of `records` that the ledger has not counted."""
    return [r.request_id for r in records if not await store.redis.exists(store.keys.settled(r.tenant, r.request_id))]


def _reconcile_cli(config, paths: list[str]) -> None:
    """The documented reconcile: the command line, reaching Redis as the config says (any mode)."""
    done = subprocess.run([sys.executable, "-m", "gateway.rebuild_ledger", *paths, "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


async def _loss_rule(store, paths, tenants, killed_wall: float, config=None) -> dict:
    """The ledger against the logs before and after a reconcile (the command line with `config`),
    checked against the rule."""
    month = datetime.now(timezone.utc).strftime("%Y-%m")
    records = list(read_records(paths))
    window = sum(r.cost_micro for r in records if killed_wall - REPLICATION_WINDOW_S <= r.ts <= killed_wall)
    before, logged = await ledger_spend(store, tenants, month), log_spend(paths)
    lost = sum(logged.get(t, 0) - before[t] for t in tenants)
    assert all(before[t] <= logged.get(t, 0) for t in tenants), (before, logged)  # never counted twice
    assert lost <= window, (lost, window)  # at most what the dead master acknowledged in its last moment
    if config is None:
        await rebuild_ledger(store, paths)
    else:  # the month's ledger wiped first: only a command that reached the new master restores it
        for t in tenants:
            await store.replace_ledger(t, None, month, 0)
        await asyncio.to_thread(_reconcile_cli, config, paths)
    after = await ledger_spend(store, tenants, month)
    assert after == {t: logged.get(t, 0) for t in tenants}
    return {"ledger_before_micro": before, "usage_log_micro": logged, "lost_micro": lost,
            "allowed_micro": window, "ledger_after_reconcile_micro": after}


async def test_cluster_master_killed_its_replica_takes_over(cluster, fakes, gateway, http, tmp_path):
    """on_redis_error open: traffic keeps flowing under local limits, then returns to Redis."""
    (_, url), = await fakes(1)
    flow, other = on_different_masters(cluster, "flow", 2)
    keys = prefix()
    gws = [await gateway(gateway_doc(cluster, url, keys, tmp_path / f"usage{i}", {flow: {}, other: {}}, "open"))
           for i in range(2)]
    load, stop, watch = Load(http, [gw.url for gw in gws]), asyncio.Event(), LocalAdmitWatch()
    running = asyncio.gather(load.steady(flow, 12, stop), load.steady(other, 4, stop))
    await wait_for(lambda: len(load.answers) >= 60, timeout_s=20, what="load under way")
    victim = cluster_master_of(cluster, f"{{{flow}}}")
    killed, killed_wall = time.monotonic(), time.time()
    cluster.kill(victim)
    await wait_for(lambda: cluster_master_of(cluster, f"{{{flow}}}") != victim, timeout_s=20, what="promotion")
    promoted = time.monotonic()
    await wait_for(lambda: time.monotonic() - max(watch.poll(), promoted) > 1.0, timeout_s=20,
                   what="a second without local admissions")
    back = max(watch.changed_at, killed)
    settled_from = len(load.answers)
    await wait_for(lambda: len(load.answers) >= settled_from + 100, timeout_s=20, what="load after failover")
    stop.set()
    await running
    await wait_for(lambda: all(gw.state.services.sinks.policy.pending_settles == 0 for gw in gws), timeout_s=10,
                   what="queued settles booked")
    assert {s for _, _, s, _ in load.answers} == {200}  # served throughout
    store = PolicyStore(client_for(cluster, keys), keys, 60)
    paths = log_paths(tmp_path / "usage0", tmp_path / "usage1")
    after_back = [r for r in read_records(paths) if r.ts > killed_wall + (back - killed)]
    assert after_back and await _settled(store, after_back) == []  # each billed in Redis
    report = await _loss_rule(store, paths, [flow, other], killed_wall)
    await store.redis.aclose()
    print("cluster chaos:", json.dumps({
        "killed_master_port": victim, "promotion_s": round(promoted - killed, 2),
        "served_by_redis_again_s": round(back - killed, 2), "requests": len(load.answers),
        "refused": 0, "admitted_under_local_limits": int(watch.count), **report}))


async def test_sentinel_master_killed_mid_load(sentinel_group, fakes, gateway, http, tmp_path):
    """on_redis_error closed: 503s with Retry-After during the failover, then every request is served
    and billed; a batch and a stored conversation carry on."""
    (fake, url), = await fakes(1)
    fake.delay_s = 0.02
    keys, top = prefix(), sentinel_group
    doc = gateway_doc(top, url, keys, tmp_path / "usage", {"flow": {}, "acme": {}}, "closed",
                      batches={"files_dir": str(tmp_path / "files"), "lease_s": 1, "retry_after_s": 0.1,
                               "max_in_flight": 2})
    gw = await gateway(doc)
    sdk = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=key_of("acme"), max_retries=0)
    stored = await sdk.responses.create(model="small", input="Remember: blue.", max_output_tokens=4, store=True)
    lines = "\n".join(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
                                  "body": {"model": "small", "max_tokens": 3,
                                           "messages": [{"role": "user", "content": f"line {i}"}]}})
                      for i in range(20)).encode()
    upload = await sdk.files.create(file=("b.jsonl", lines), purpose="batch")
    batch = await sdk.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    victim = sentinel_master(top)
    top.client(victim).execute_command("WAIT", 1, 2000)  # what the test leans on was replicated

    load, stop = Load(http, [gw.url]), asyncio.Event()
    running = asyncio.create_task(load.steady("flow", 12, stop))
    await wait_for(lambda: len(load.answers) >= 40, timeout_s=20, what="load under way")
    killed, killed_wall = time.monotonic(), time.time()
    top.kill(victim)
    await wait_for(lambda: sentinel_master(top) != victim, timeout_s=30, interval_s=0.1, what="promotion")
    promoted = time.monotonic()

    def quiet_since() -> float:
        refused = [end for _, end, status, _ in load.answers if status != 200]
        return time.monotonic() - max(refused + [promoted]) > 1.0
    await wait_for(quiet_since, timeout_s=20, what="a second without refusals")
    count = len(load.answers)
    await wait_for(lambda: len(load.answers) >= count + 100, timeout_s=20, what="load after failover")
    stop.set()
    await running
    refused = [(s, c) for _, _, s, c in load.answers if s != 200]
    back = max([end for _, end, s, _ in load.answers if s != 200] + [killed])
    assert {c for _, c in refused} <= {"service_unavailable"}  # 503 with Retry-After, nothing else
    assert all(s == 200 for start, _, s, _ in load.answers if start > promoted + 1.0)

    store = PolicyStore(client_for(top, keys), keys, 60)
    paths = log_paths(tmp_path / "usage")
    after = [r for r in read_records(paths) if r.tenant == "flow" and r.ts > killed_wall + (promoted - killed) + 1.0]
    assert after and await _settled(store, after) == []
    done = await wait_for(lambda: _final(sdk, batch.id), timeout_s=60, what="the batch")
    assert done.status == "completed" and done.request_counts.completed == 20
    again = await sdk.responses.create(model="small", input="Which colour?", previous_response_id=stored.id,
                                       max_output_tokens=4)
    assert again.status in ("completed", "incomplete")  # served (cut at max_output_tokens), not refused
    report = await _loss_rule(store, paths, ["flow", "acme"], killed_wall, config=gw.path)
    await store.redis.aclose()
    await sdk.close()
    print("sentinel chaos:", json.dumps({
        "killed_master_port": victim, "promotion_s": round(promoted - killed, 2),
        "served_again_s": round(back - killed, 2), "requests": len(load.answers),
        "refused_503_retry_after": len(refused), **report}))


async def _final(sdk, batch_id: str):
    try:
        batch = await sdk.batches.retrieve(batch_id)
    except openai.APIStatusError:
        return None
    return batch if batch.status in ("completed", "failed", "expired", "cancelled") else None
