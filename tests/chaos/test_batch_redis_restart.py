"""Redis (our own, AOF on) is SIGKILLed and restarted while a batch drains: the runner backs
off, resumes by itself, and every line is answered once in the output and billed once (settles
that met the outage are booked by the policy's replay once Redis is back)."""
from __future__ import annotations

import asyncio
import signal

from tests.gateway.batches.batch_helpers import batch_config, client, finished, jsonl, lines_of, submit, until, usage_of
from tests.support import start_persistent_redis as start_redis, Pending, wait_for

LINES = 40


async def test_a_batch_survives_redis_killed_and_restarted(own_redis, fakes, gateway, tmp_path):
    port, data, procs = own_redis
    (fake, url), = await fakes(1)
    fake.delay_s = 0.05
    doc = batch_config(url, "tgchaos-batch:", tmp_path / "usage", lease_s=1, max_in_flight=4, retry_after_s=0.1)
    doc["redis"]["url"] = f"redis://127.0.0.1:{port}/0"
    gw = await gateway(doc)
    async with client(gw.url) as sdk:
        batch = await submit(sdk, jsonl(LINES, max_tokens=3))
        await until(sdk, batch.id, lambda b: b.request_counts.completed >= 5)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        procs.append(await asyncio.to_thread(start_redis, port, data))  # same dir: replays the AOF
        done = await finished(sdk, batch.id, timeout_s=90)
        out = await lines_of(sdk, done.output_file_id)
        # settles that met the outage wait in the policy's queue until Redis is back
        billed = await wait_for(lambda: _billed(sdk, LINES), timeout_s=15, what="queued settles booked")
    assert done.status == "completed" and done.request_counts.completed == LINES
    assert sorted(line["custom_id"] for line in out) == sorted(f"req-{i}" for i in range(LINES))
    assert billed == LINES  # every line once


async def _billed(sdk, at_least: int) -> int | None:
    usage = await usage_of(sdk)
    requests = sum(t["requests"] for day in usage["days"] for t in day["tiers"].values())
    return requests if requests >= at_least else Pending(f"{requests} billed")
