"""What the console charts over time: a per-minute rollup and a capped list of recent routing
decisions, in Redis so that every gateway process and replica adds to the same picture.

Keys, under `<prefix>console:`:
- `m:<unix minute>`: a hash of counters for that minute, per tier (`n:`, `in:`, `out:`,
  `cost:` and `saved:` against the top tier, in micro-dollars) and per routing reason (`why:`), plus `err` (no upstream
  answered). It expires after `console.retain_minutes`.
- `recent`: a capped stream of decisions (tier, reason, scores, latency, tokens, cost). It
  holds prompt text only when `console.log_prompts` is on.

The write is one pipelined round trip per request, in a background task, so the request never
waits on it; at most MAX_PENDING writes are in flight and the rest are dropped and counted.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from prometheus_client import Counter

log = logging.getLogger(__name__)
MAX_PENDING = 256
PROMPT_CHARS = 2000  # the most of a prompt kept when prompt logging is on
DROPPED = Counter("tiergate_console_writes_dropped_total", "Console activity writes dropped", ["why"])


@dataclass(frozen=True)
class Served:
    """One finished request as the console sees it: no key, no prompt unless logging is on."""
    kind: str
    tenant: str
    requested_model: str
    tier: str
    reason: str | None        # None: no upstream answered
    scores: list[float] | None
    latency_ms: float
    prompt_tokens: int
    completion_tokens: int
    cost_micro: int
    top_cost_micro: int
    request_id: str
    prompt: str | None = None

    @property
    def saved_micro(self) -> int:  # as tiergate_cost_saved_usd_total counts it
        return max(0, self.top_cost_micro - self.cost_micro)


def minute_of(ts_s: float) -> int:
    return int(ts_s // 60)


class ActivityLog:
    def __init__(self, redis, prefix: str, settings):
        self.redis = redis
        self.base = prefix + "console:"
        self.settings = settings
        self._pending: set[asyncio.Task] = set()

    @property
    def enabled(self) -> bool:
        return self.redis is not None

    def record(self, served: Served) -> None:
        """Queue the write and return at once."""
        if len(self._pending) >= MAX_PENDING:
            DROPPED.labels("backlog").inc()
            return
        task = asyncio.get_running_loop().create_task(self._write(served, time.time()))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def drain(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def _write(self, s: Served, now: float) -> None:
        key = f"{self.base}m:{minute_of(now)}"
        pipe = self.redis.pipeline(transaction=False)
        if s.reason is None:
            pipe.hincrby(key, "err", 1)
        else:
            for field, amount in (("n", 1), ("in", s.prompt_tokens), ("out", s.completion_tokens),
                                  ("cost", s.cost_micro), ("saved", s.saved_micro)):
                pipe.hincrby(key, f"{field}:{s.tier}", amount)
            pipe.hincrby(key, f"why:{s.reason}", 1)
        pipe.expire(key, self.settings.retain_minutes * 60)
        row = {"ts_ms": int(now * 1000), "kind": s.kind, "tenant": s.tenant, "model": s.requested_model,
               "tier": s.tier, "reason": s.reason or "error", "latency_ms": round(s.latency_ms, 1),
               "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens,
               "cost_micro": s.cost_micro, "saved_micro": s.saved_micro,
               "request_id": s.request_id,
               "scores": ",".join(f"{p:.4f}" for p in s.scores) if s.scores else ""}
        if self.settings.log_prompts and s.prompt:
            row["prompt"] = s.prompt[:PROMPT_CHARS]
        pipe.xadd(self.base + "recent", row, maxlen=self.settings.recent, approximate=True)
        try:
            await pipe.execute()
        except Exception as exc:  # the console is best effort; the request already succeeded
            DROPPED.labels("redis").inc()
            log.debug("console activity write failed: %s", exc)

    async def minutes(self, last: int, now: float | None = None) -> tuple[list[int], list[dict[str, int]]]:
        """The last `last` whole minutes up to now, oldest first, with each minute's counters."""
        end = minute_of(time.time() if now is None else now)
        stamps = list(range(end - last + 1, end + 1))
        pipe = self.redis.pipeline(transaction=False)
        for minute in stamps:
            pipe.hgetall(f"{self.base}m:{minute}")
        replies = await pipe.execute()
        return stamps, [{_text(k): int(v) for k, v in reply.items()} for reply in replies]

    async def recent(self, count: int) -> list[dict]:
        entries = await self.redis.xrevrange(self.base + "recent", count=count)
        rows = []
        for _, fields in entries:
            row = {_text(k): _text(v) for k, v in fields.items()}
            for name in ("ts_ms", "prompt_tokens", "completion_tokens", "cost_micro", "saved_micro"):
                row[name] = int(row.get(name, 0))
            row["latency_ms"] = float(row.get("latency_ms", 0))
            row["scores"] = [float(p) for p in row["scores"].split(",")] if row.get("scores") else None
            rows.append(row)
        return rows


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
