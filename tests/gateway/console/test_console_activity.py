"""The console's activity log on the shared Redis (its own prefix): counts are exact, survive a
failed flush and are written once; the recent list is capped per flush."""
from __future__ import annotations

import redis.asyncio as aioredis

from gateway.config import ConsoleSettings
from gateway.console.activity import ROWS_PER_FLUSH, ActivityLog, Served
from tests.support import SHARED_REDIS, free_port


def _served(i: int = 0, reason: str | None = "classifier") -> Served:
    return Served(kind="chat", tenant="acme", requested_model="auto", tier="small", reason=reason,
                  scores=[0.7, 0.2, 0.05, 0.05], latency_ms=12.5, prompt_tokens=3, completion_tokens=2,
                  cost_micro=5, top_cost_micro=9, request_id=f"req-{i}", prompt="a secret prompt")


async def _totals(log: ActivityLog) -> dict[str, int]:
    _, minutes = await log.minutes(3)
    out: dict[str, int] = {}
    for minute in minutes:
        for field, value in minute.items():
            out[field] = out.get(field, 0) + value
    return out


async def test_a_failed_flush_keeps_the_counts_and_nothing_is_counted_twice(redis_prefix):
    down = aioredis.from_url(f"redis://127.0.0.1:{free_port()}", socket_connect_timeout=0.2)
    log = ActivityLog(down, redis_prefix, ConsoleSettings())
    log.record(_served(1))
    log.record(_served(2, reason=None))  # no upstream answered
    await log.flush()  # Redis is not there: the counts wait for the next flush
    await down.aclose()
    log.redis = aioredis.from_url(SHARED_REDIS)
    try:
        log.record(_served(3))
        await log.flush()
        await log.flush()  # nothing new: writes nothing
        assert await _totals(log) == {"n:small": 2, "in:small": 6, "out:small": 4, "cost:small": 10,
                                      "saved:small": 8, "why:classifier": 2, "err": 1}
        rows = await log.recent(10)
        assert [r["request_id"] for r in rows] == ["req-3"]  # the failed flush's rows were dropped
        assert rows[0]["scores"] == [0.7, 0.2, 0.05, 0.05] and "prompt" not in rows[0]
    finally:
        await log.redis.aclose()


async def test_recent_rows_are_capped_per_flush_and_prompts_kept_only_when_logging(redis_prefix):
    client = aioredis.from_url(SHARED_REDIS)
    log = ActivityLog(client, redis_prefix, ConsoleSettings(log_prompts=True))
    try:
        for i in range(ROWS_PER_FLUSH + 50):
            log.record(_served(i))
        await log.flush()
        rows = await log.recent(1000)
        assert len(rows) == ROWS_PER_FLUSH and rows[0]["request_id"] == f"req-{ROWS_PER_FLUSH + 49}"
        assert rows[0]["prompt"] == "a secret prompt"
        assert (await _totals(log))["n:small"] == ROWS_PER_FLUSH + 50  # counters stay exact
    finally:
        await client.aclose()
