"""Redis (our own, AOF on) is SIGKILLed and restarted while a batch drains: the runner backs
off, resumes by itself, and every line is answered once in the output and billed once."""
from __future__ import annotations

import asyncio
import signal

import openai

from tests.gateway.batch_helpers import batch_config, client, finished, jsonl, lines_of, submit, until
from tests.support import start_persistent_redis as start_redis, wait_for

LINES = 40


async def _usage(sdk):
    """The tenant's usage; None while the policy still skips Redis after the outage (a 503)."""
    try:
        return await sdk.get("/usage", cast_to=object)
    except openai.APIStatusError as err:
        if err.status_code != 503:
            raise
        return None


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
        usage = await wait_for(lambda: _usage(sdk), timeout_s=10, what="usage readable again")
    assert done.status == "completed" and done.request_counts.completed == LINES
    assert sorted(line["custom_id"] for line in out) == sorted(f"req-{i}" for i in range(LINES))
    billed = [t for day in usage["days"] for t in day["tiers"].values()]
    assert sum(t["requests"] for t in billed) == LINES
