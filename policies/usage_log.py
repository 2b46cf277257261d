"""Append-only JSONL usage log, one file per gateway replica, rotated by size.

Every settled request is one line; the log is the chargeback audit trail and the source from
which `python -m policies rebuild-ledger` recomputes the Redis ledger. Durability (fsync):
  always   - fsync after every line (a machine crash loses nothing; costs a disk flush per request)
  interval - write+flush every line (a *process* crash loses nothing), fsync at most every
             `fsync_interval_s` (a machine crash loses at most that window; like Redis everysec)
  never    - leave it to the OS
Rotated files are renamed `<stem>.<UTC timestamp>.jsonl` and never deleted here: archive them.
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from policies.config import UsageLogSettings
from policies.periods import Periods, week_of_day


@dataclass(frozen=True)
class UsageRecord:
    ts: float
    request_id: str
    tenant: str
    key_id: str | None
    tier: str
    prompt_tokens: int
    completion_tokens: int
    cost_micro: int
    day: str     # UTC day and month the ledger booked it under (rebuild uses these, not ts)
    month: str
    ledger: str  # "redis" (counted in Redis), "unconfirmed" (Redis failed: rebuild needed)
    client_request_id: str | None = None  # the client's own id (bounded), for its support tickets
    # where the token counts came from: "worker" (the upstream's own count), "tokenizer" (the
    # gateway counted with the tier's tokenizer) or "estimate" (the gateway's estimate)
    usage_source: str = "worker"
    tags: tuple[str, ...] | list[str] = ()  # the tags its tenant allows that the request carried
    cascade: str | None = None  # what a cascaded request came to (kept:confident, escalated:low_confidence, ...)
    week: str | None = None  # the week (the local date it began) the ledger booked it under; None: older records

    def to_json(self) -> str:
        # its fields as they stand: asdict's deep copy of every value is the cost of a line, twice a request
        return json.dumps(vars(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> "UsageRecord":
        return cls(**json.loads(line))


def record_periods(record: UsageRecord) -> Periods:
    """The periods the ledger booked `record` under (a record from before weeks: its day's week from Monday)."""
    return Periods(record.day, record.week or week_of_day(record.day), record.month)


def replica_log_name() -> str:
    host = "".join(c if c.isalnum() or c in "-_." else "_" for c in socket.gethostname())
    return f"usage-{host}-{os.getpid()}.jsonl"


class UsageLog:
    def __init__(self, settings: UsageLogSettings, file_name: str | None = None):
        self.settings = settings
        os.makedirs(settings.dir, exist_ok=True)
        self.path = os.path.join(settings.dir, file_name or replica_log_name())
        self._fh = open(self.path, "a", encoding="utf-8")
        self._size = self._fh.tell()
        self._last_fsync = time.monotonic()

    def append(self, record: UsageRecord) -> None:
        line = record.to_json() + "\n"
        if self._size and self._size + len(line) > self.settings.max_bytes:
            self._rotate()
        self._fh.write(line)
        self._fh.flush()
        self._size += len(line.encode("utf-8"))
        mode = self.settings.fsync
        if mode == "always" or (mode == "interval"
                                and time.monotonic() - self._last_fsync >= self.settings.fsync_interval_s):
            os.fsync(self._fh.fileno())
            self._last_fsync = time.monotonic()

    def _rotate(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        os.replace(self.path, f"{self.path[:-len('.jsonl')]}.{stamp}.jsonl")
        self._fh = open(self.path, "a", encoding="utf-8")
        self._size = 0

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            if self.settings.fsync != "never":
                os.fsync(self._fh.fileno())
            self._fh.close()


def read_records(paths: list[str]) -> list[UsageRecord]:
    """All records of the given log files; a torn last line (crash mid-write) is skipped. The audit
    logs beside them (`audit-*.jsonl`, registry/audit.py) are passed over, so `<dir>/*.jsonl` works."""
    records = []
    for path in paths:
        if os.path.basename(path).startswith("audit-"):
            continue
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.endswith("\n"):
                    break
                try:
                    records.append(UsageRecord.from_json(line))
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"{path}:{number}: not a usage record: {exc}") from None
    return records
