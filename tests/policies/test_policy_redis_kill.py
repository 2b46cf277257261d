"""A persistence-enabled Redis (our own, on a free port) is SIGKILLed and restarted during a
load run: fail-open keeps admitting, fail-closed answers 503, nothing else escapes; both recover
by themselves; afterwards the ledger equals the usage logs to the micro-dollar, and
rebuild-ledger restores it from the logs when Redis loses its data entirely."""
from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from policies.usage_log import read_records
from wire.errors import OpenAIError
from tests.support import start_persistent_redis, wait_for

ROOT = Path(__file__).parent.parent.parent




async def _ledger(service, tenant: str) -> int:
    report = await service.usage(service.authenticate(f"Bearer k-{tenant}"), days=1)
    return report["month_spend_micro_usd"]


async def test_sigkill_and_restart_during_load(own_redis, make_service):
    port, data, procs = own_redis
    client = aioredis.Redis(port=port, socket_timeout=0.25, socket_connect_timeout=0.25)  # as the gateway connects
    tenants = {t: {"keys": [f"k-{t}"], "rate_limits": {"requests_per_minute": 100_000}} for t in ("op", "cl")}
    fail_open = make_service(tenants, redis=client, on_redis_error="open", redis_timeout_s=0.5)
    fail_closed = make_service(tenants, redis=client, on_redis_error="closed", redis_timeout_s=0.5)
    outcomes = {"open_admitted": 0, "open_unlimited": 0, "closed_admitted": 0, "closed_503": 0, "other": []}
    done = asyncio.Event()  # load runs until limits have been enforced again after the restart
    metric = ("tiergate_policy_redis_unavailable_total", {"operation": "admit", "action": "local_limits"})
    counted_before = REGISTRY.get_sample_value(*metric) or 0.0

    async def load(service, tenant_name: str, kind: str, worker: int) -> None:
        tenant, i = service.authenticate(f"Bearer k-{tenant_name}"), 0
        while not done.is_set():
            i += 1
            rid = f"{kind}-{worker}-{i}"
            try:
                admission = await service.admit(tenant, rid, 100, 50)
                outcomes[f"{kind}_admitted"] += 1
                outcomes["open_unlimited"] += kind == "open" and not admission.limited
                await service.settle(admission, rid, "medium", 100 + i % 17, i % 50)
                await service.settle(admission, rid, "medium", 100 + i % 17, i % 50)  # a retry: no double count
            except OpenAIError as err:
                if kind == "closed" and err.status == 503 and err.headers.get("Retry-After"):
                    outcomes["closed_503"] += 1
                else:
                    outcomes["other"].append((kind, err.status, err.code))
            except Exception as exc:  # anything unhandled is a failure of the test
                outcomes["other"].append((kind, repr(exc)))
            await asyncio.sleep(0.005)

    def limited() -> int:
        return outcomes["open_admitted"] - outcomes["open_unlimited"]

    async def chaos() -> None:
        await wait_for(lambda: outcomes["open_admitted"] >= 20 and outcomes["closed_admitted"] >= 20, timeout_s=10)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        await wait_for(lambda: outcomes["open_unlimited"] >= 5 and outcomes["closed_503"] >= 5, timeout_s=10)
        procs.append(await asyncio.to_thread(start_persistent_redis, port, data))  # same dir: replays the AOF
        before = limited()
        await wait_for(lambda: limited() >= before + 20, timeout_s=15)
        done.set()

    await asyncio.gather(chaos(), *(load(fail_open, "op", "open", w) for w in range(4)),
                         *(load(fail_closed, "cl", "closed", w) for w in range(4)))
    print(outcomes | {"other": outcomes["other"][:5]})
    assert outcomes["other"] == []
    assert outcomes["open_unlimited"] > 0 and outcomes["closed_503"] > 0   # the outage was felt, per config
    assert outcomes["open_admitted"] > outcomes["open_unlimited"]          # and limits were back afterwards
    assert REGISTRY.get_sample_value(*metric) - counted_before == outcomes["open_unlimited"]  # fail-open is counted
    # recovered by itself: both services talk to Redis again without any restart of theirs
    assert (await fail_open.admit(fail_open.authenticate("Bearer k-op"), "after-1", 1, 1)).limited
    assert (await fail_closed.admit(fail_closed.authenticate("Bearer k-cl"), "after-2", 1, 1)).limited
    for service in (fail_open, fail_closed):
        await service.replay_pending()
        assert service.pending_settles == 0
    logs = [fail_open.usage_log.path, fail_closed.usage_log.path]
    records = read_records(logs)
    assert any(r.ledger == "unconfirmed" for r in records)                 # some settles hit the outage
    logged = {t: sum(r.cost_micro for r in records if r.tenant == t) for t in ("op", "cl")}
    assert {t: await _ledger(fail_open, t) for t in ("op", "cl")} == logged

    # Redis loses everything (disk gone): rebuild-ledger recomputes the ledger from the logs.
    procs[-1].send_signal(signal.SIGKILL)
    procs[-1].wait()
    shutil.rmtree(data)
    data.mkdir()
    procs.append(start_persistent_redis(port, data))
    fresh = aioredis.Redis(port=port)
    assert await fresh.dbsize() == 0
    rebuilt = subprocess.run([sys.executable, "-m", "policies", "rebuild-ledger", *logs, "--redis-url",
                              f"redis://127.0.0.1:{port}/0", "--prefix", fail_open.store.keys.prefix],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert rebuilt.returncode == 0, rebuilt.stderr
    # read through the service: its client reconnected to the fresh server by itself
    assert {t: await _ledger(fail_open, t) for t in ("op", "cl")} == logged
    await fresh.aclose()
    await client.aclose()
