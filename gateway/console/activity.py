"""What the console charts over time: a per-minute rollup and a capped list of recent routing
decisions, in Redis so that every gateway process and replica adds to the same picture.

Keys, under `<prefix>console:`:
- `m:<unix minute>`: a hash of counters for that minute, per tier (`n:`, `in:`, `out:`,
  `cost:` and `saved:` against the top tier, in micro-dollars) and per routing reason
  (`why:`), plus `err` (no upstream answered). It expires after `console.retain_minutes`.
- `recent`: a capped stream of decisions (tier, reason, scores, latency, tokens, cost). It
  holds prompt text only when `console.log_prompts` is on.

A request only adds to counters in this process's memory (a few dict updates); a background
task flushes them once a second in one pipelined round trip. One Redis write per request
cost a third of a gateway process's throughput at saturation. Each flush carries at most
ROWS_PER_FLUSH recent decisions (the console shows the last 100); counters are exact. A flush
that fails is retried with the next one; a process that dies loses at most its last second.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict, deque
from dataclasses import dataclass

from ..core.metrics import Counter

log = logging.getLogger(__name__)
FLUSH_S = 1.0
ROWS_PER_FLUSH = 100
PROMPT_CHARS = 2000  # the most of a prompt kept when prompt logging is on
DROPPED = Counter("tiergate_console_rows_dropped_total", "Recent-decision rows the console could not store", ["why"])


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
        self._counts: defaultdict[tuple[int, str], int] = defaultdict(int)  # (minute, field) -> amount
        self._rows: deque[tuple[float, Served]] = deque(maxlen=ROWS_PER_FLUSH)

    @property
    def enabled(self) -> bool:
        return self.redis is not None

    def record(self, s: Served) -> None:
        """Count one finished request in memory; the next flush writes it."""
        now = time.time()
        minute, counts = minute_of(now), self._counts
        if s.reason is None:
            counts[(minute, "err")] += 1
        else:
            for field, amount in (("n", 1), ("in", s.prompt_tokens), ("out", s.completion_tokens),
                                  ("cost", s.cost_micro), ("saved", s.saved_micro)):
                counts[(minute, f"{field}:{s.tier}")] += amount
            counts[(minute, f"why:{s.reason}")] += 1
        if len(self._rows) == ROWS_PER_FLUSH:
            DROPPED.labels("rate").inc()  # the oldest row of this second gives way; counters stay exact
        self._rows.append((now, s))  # made into a row at flush time, off the request path

    def _row(self, now: float, s: Served) -> dict:
        row = {"ts_ms": int(now * 1000), "kind": s.kind, "tenant": s.tenant, "model": s.requested_model,
               "tier": s.tier, "reason": s.reason or "error", "latency_ms": round(s.latency_ms, 1),
               "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens,
               "cost_micro": s.cost_micro, "saved_micro": s.saved_micro, "request_id": s.request_id,
               "scores": ",".join(f"{p:.4f}" for p in s.scores) if s.scores else ""}
        if self.settings.log_prompts and s.prompt:
            row["prompt"] = s.prompt[:PROMPT_CHARS]
        return row

    async def run(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_S)
            await self.flush()

    async def flush(self) -> None:
        counts, rows = self._counts, list(self._rows)
        if not counts and not rows:
            return
        self._counts, self._rows = defaultdict(int), deque(maxlen=ROWS_PER_FLUSH)
        pipe = self.redis.pipeline(transaction=False)
        for (minute, field), amount in counts.items():
            pipe.hincrby(f"{self.base}m:{minute}", field, amount)
        for minute in {minute for minute, _ in counts}:
            pipe.expire(f"{self.base}m:{minute}", self.settings.retain_minutes * 60)
        for now, served in rows:
            pipe.xadd(self.base + "recent", self._row(now, served), maxlen=self.settings.recent, approximate=True)
        try:
            await pipe.execute()
        except Exception as exc:  # Redis away: keep the counts for the next flush, within the window
            oldest = minute_of(time.time()) - self.settings.retain_minutes
            for key, amount in counts.items():
                if key[0] > oldest:
                    self._counts[key] += amount
            DROPPED.labels("redis").inc(len(rows))
            log.debug("console activity flush failed: %s", exc)

    async def drain(self) -> None:
        """The last flush, at shutdown."""
        if self.enabled:
            await self.flush()

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
