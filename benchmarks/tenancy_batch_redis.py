"""Redis growth from a batch of large results (issue 56, part 1).

An in-process gateway on the shared Redis (a key prefix of its own, deleted after) in front of a
fake upstream whose every answer is ANSWER_BYTES long runs a LINES-line batch twice: for a tenant
whose `storage.files_bytes` is 1 MiB (the batch must fail at the quota, its files within it) and
for one with room for every result (it completes). While each batch runs, the memory Redis spends
on the gateway's keys (MEMORY USAGE of every key under the prefix) is sampled; its peak, the
output file's size and the tenant's stored bytes are reported. `python -m benchmarks.tenancy_batch_redis`
prints one JSON line.
"""
from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import redis.asyncio as aioredis
import yaml

from launcher.fake_upstream import start_fake
from launcher.processes import SHARED_REDIS, delete_prefix
from policies.keys import hash_key

LINES = 10
ANSWER_BYTES = 1 << 20
QUOTAS = {"tight": 1 << 20, "roomy": 64 << 20}
KEYS = {name: f"sk-batch-redis-{name}-key" for name in QUOTAS}


def _config(url: str, prefix: str, workdir: Path) -> dict:
    tenants = {name: {"keys": [{"id": "k", "sha256": hash_key(KEYS[name])}], "storage": {"files_bytes": quota}}
               for name, quota in QUOTAS.items()}
    return {"tiers": [{"name": "small", "level": 1, "model": "model-small",
                       "price_per_mtok": {"input": 1.0, "output": 2.0}, "workers": [{"url": url}]}],
            "redis": {"url": SHARED_REDIS, "key_prefix": prefix},
            "health": {"interval_s": 0.2, "timeout_s": 0.5}, "timeouts": {"connect_s": 1.0, "read_s": 30.0},
            "tenants": tenants, "policy": {"usage_log": {"dir": str(workdir / "usage")}},
            "batches": {"files_dir": str(workdir / "files"), "lease_s": 1, "max_in_flight": 2}}


def _input() -> bytes:
    return b"".join(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
                                "body": {"model": "small", "max_tokens": 4,
                                         "messages": [{"role": "user", "content": f"line {i}"}]}}).encode() + b"\n"
                    for i in range(LINES))


async def _redis_bytes(redis, prefix: str) -> int:
    keys = [k async for k in redis.scan_iter(match=prefix + "*", count=1000)]
    return sum([await redis.memory_usage(k) or 0 for k in keys])


async def _batch(session: aiohttp.ClientSession, url: str, tenant: str, redis, prefix: str) -> dict:
    auth = {"Authorization": f"Bearer {KEYS[tenant]}"}
    form = aiohttp.FormData()
    form.add_field("purpose", "batch")
    form.add_field("file", _input(), filename="in.jsonl")
    async with session.post(url + "/v1/files", data=form, headers=auth) as response:
        file_id = (await response.json())["id"]
    before = await _redis_bytes(redis, prefix)
    async with session.post(url + "/v1/batches", headers=auth, json={
            "input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}) as response:
        batch = await response.json()
    peak = before
    while batch["status"] not in ("completed", "failed", "expired", "cancelled"):
        peak = max(peak, await _redis_bytes(redis, prefix))
        await asyncio.sleep(0.05)
        async with session.get(url + f"/v1/batches/{batch['id']}", headers=auth) as response:
            batch = await response.json()
    async with session.get(url + "/v1/files", headers=auth) as response:
        stored = sum(f["bytes"] for f in (await response.json())["data"])
    output = 0
    if batch["output_file_id"]:
        async with session.get(url + f"/v1/files/{batch['output_file_id']}", headers=auth) as response:
            output = (await response.json())["bytes"]
    return {"status": batch["status"], "lines_completed": batch["request_counts"]["completed"],
            "error": (batch["errors"] or {}).get("data", [{}])[0].get("code"),
            "files_bytes_quota": QUOTAS[tenant], "tenant_stored_bytes": stored, "output_file_bytes": output,
            "redis_peak_growth_bytes": peak - before}


async def _run(workdir: Path) -> dict:
    from gateway.app import build_app, start_site
    from gateway.core.classify import PromptLengthClassifier
    from gateway.config import load_config
    from gateway.state import GatewayState

    fake, fake_runner, fake_url = await start_fake(name="large-answers")
    fake.reply = "x" * ANSWER_BYTES
    prefix = f"tgbench-batchredis:{uuid.uuid4().hex[:8]}:"
    path = workdir / "gateway.yaml"
    path.write_text(yaml.safe_dump(_config(fake_url, prefix, workdir)))
    state = GatewayState(load_config(path), str(path), classifier=PromptLengthClassifier())
    app = build_app(state)
    runner = await start_site(app, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    redis = aioredis.from_url(SHARED_REDIS)
    started = time.perf_counter()
    try:
        async with aiohttp.ClientSession() as session:
            results = {tenant: await _batch(session, url, tenant, redis, prefix) for tenant in QUOTAS}
    finally:
        await redis.aclose()
        await runner.cleanup()
        await fake_runner.cleanup()
        delete_prefix(prefix)
    return {"lines": LINES, "answer_bytes": ANSWER_BYTES, **results, "seconds": round(time.perf_counter() - started, 2)}


def measure() -> dict:
    with tempfile.TemporaryDirectory(prefix="tiergate-batch-redis-") as workdir:
        return asyncio.run(_run(Path(workdir)))


if __name__ == "__main__":
    print(json.dumps(measure()))
