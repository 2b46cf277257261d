"""The documented reconcile on a Redis Cluster: `python -m gateway.rebuild_ledger LOGS --config`
after a master was SIGKILLed and its replica promoted, over thousands of usage-log rows, exits 0
and leaves the ledger equal to the logs (it exited 1 with `Event loop is closed` from the Cluster
client's aclose(): policies/atomic.py says why)."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from launcher.redis_topology import cluster_master_of, start_cluster
from policies.store import PolicyStore
from policies.usage_log import UsageRecord
from tests.chaos.redis_modes_helpers import client_for, ledger_spend, log_spend, redis_settings
from tests.gateway.gw_helpers import tier
from tests.support import wait_for

ROWS, TENANTS = 3000, 40


@pytest.fixture
def cluster(tmp_path):
    top = start_cluster(tmp_path / "cluster")
    yield top
    top.stop()


def _usage_log(path, month_start: datetime) -> None:
    lines = []
    for i in range(ROWS):
        when = month_start + timedelta(days=i % 3, seconds=i)
        lines.append(UsageRecord(when.timestamp(), f"req-{i}", f"t{i % TENANTS}", "k", "small", 10, 5 + i % 7,
                                 100 + i % 13, when.strftime("%Y-%m-%d"), when.strftime("%Y-%m"), "redis").to_json())
    path.write_text("\n".join(lines + lines[:50]) + "\n")  # 50 rows logged twice (two replicas): counted once


async def test_rebuild_ledger_exits_0_on_a_cluster_after_a_master_is_killed(cluster, tmp_path):
    keys = f"tgrebuild-{uuid.uuid4().hex[:8]}:"
    log = tmp_path / "usage.jsonl"
    month_start = datetime.now(timezone.utc).replace(day=1, hour=1, minute=0, second=0, microsecond=0)
    _usage_log(log, month_start)
    killed = cluster_master_of(cluster, "{t0}")
    cluster.kill(killed)
    await wait_for(lambda: cluster_master_of(cluster, "{t0}") != killed, timeout_s=30, interval_s=0.2,
                   what="a replica promoted in the killed master's place")
    config = tmp_path / "tiergate.yaml"
    config.write_text(yaml.safe_dump({"tiers": [tier("small", 1, ["http://127.0.0.1:9"])],
                                      "redis": redis_settings(cluster, keys, timeout_s=2.0)}))
    done = subprocess.run([sys.executable, "-m", "gateway.rebuild_ledger", str(log), "--config", str(config)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.splitlines()[-1])
    assert (summary["requests"], summary["duplicates_skipped"]) == (ROWS, 50)
    store = PolicyStore(client_for(cluster, keys), keys, 60)
    try:
        tenants = [f"t{i}" for i in range(TENANTS)]
        assert await ledger_spend(store, tenants, month_start.strftime("%Y-%m")) == log_spend([str(log)])
    finally:
        await store.redis.aclose()
