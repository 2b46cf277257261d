"""Usage log: one JSONL line per settled request, size rotation, torn-line tolerance, and
rebuild-ledger recomputing Redis exactly from the files."""
from __future__ import annotations

import glob
import json
import os

from policies.config import UsageLogSettings
from policies.rebuild import rebuild_ledger, totals_from_records
from policies.store import PolicyStore
from policies.usage_log import UsageLog, UsageRecord, read_records


def _record(i: int, tenant: str = "t", cost: int = 3) -> UsageRecord:
    return UsageRecord(ts=1.0, request_id=f"r{i}", tenant=tenant, key_id="k", tier="small", prompt_tokens=10,
                       completion_tokens=i, cost_micro=cost, day="2026-11-22", month="2026-11", ledger="redis")


def test_rotates_by_size_and_keeps_every_record(tmp_path):
    log = UsageLog(UsageLogSettings(dir=str(tmp_path), max_bytes=4096, fsync="interval"), "usage-h-1.jsonl")
    for i in range(200):
        log.append(_record(i))
    log.close()
    files = sorted(glob.glob(str(tmp_path / "usage-h-1*.jsonl")))
    assert len(files) > 3 and all(os.path.getsize(f) <= 4096 for f in files)
    assert sorted(r.completion_tokens for r in read_records(files)) == list(range(200))


def test_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "u.jsonl"
    path.write_text(_record(1).to_json() + "\n" + _record(2).to_json()[:20])
    assert [r.request_id for r in read_records([str(path)])] == ["r1"]


def test_totals_count_a_request_id_once_per_tenant():
    totals = totals_from_records([_record(1), _record(1), _record(2), _record(1, tenant="u")])
    assert (totals.requests, totals.duplicates) == (3, 1)
    assert totals.day_spend[("t", "2026-11-22")] == 6 and totals.month_spend[("u", "2026-11")] == 3


async def test_rebuild_overwrites_the_ledger_from_logs(shared_redis, tmp_path):
    client, prefix = shared_redis
    store = PolicyStore(client, prefix, 60)
    await client.set(store.keys.spend_day("t", "2026-11-22"), 999)       # a wrong ledger
    path = tmp_path / "u.jsonl"
    path.write_text("".join(_record(i, cost=i + 1).to_json() + "\n" for i in range(10)))
    summary = await rebuild_ledger(store, [str(path)])
    assert summary["spend_micro_usd"] == 55 and summary["requests"] == 10
    assert await store.spend("t", "2026-11-22", "2026-11") == (55, 55)
    report = await store.usage("t", ["2026-11-22"], "2026-11")
    assert report["days"][0]["tiers"]["small"] == {"requests": 10, "prompt_tokens": 100,
                                                   "completion_tokens": 45, "cost_micro": 55}


def test_a_line_written_before_usage_source_reads_as_the_workers_count(tmp_path):
    line = {"ts": 1.0, "request_id": "r", "tenant": "t", "key_id": None, "tier": "small", "prompt_tokens": 1,
            "completion_tokens": 2, "cost_micro": 3, "day": "2026-01-01", "month": "2026-01", "ledger": "redis"}
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(line) + "\n" + _record(1).to_json().replace('"worker"', '"estimate"') + "\n")
    assert [r.usage_source for r in read_records([str(path)])] == ["worker", "estimate"]
