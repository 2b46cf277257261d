"""State one gateway process keeps across config reloads: its usage log, the request ids it
settled recently, and settles still waiting for Redis. A reload builds a new PolicyService;
requests in flight finish on the old one; both must write the same log and share the dedup set."""
from __future__ import annotations

import logging
from collections import OrderedDict, deque
from typing import Any

from policies.config import UsageLogSettings
from policies.registry.audit import open_audit_log
from policies.usage_log import UsageLog, UsageRecord

log = logging.getLogger(__name__)
LOCAL_SETTLED_MAX = 100_000  # per-process memory of settled ids: dedup even while Redis is down
PENDING_MAX = 100_000        # settles waiting for Redis to return; beyond that, rebuild-ledger books them


class ReplicaState:
    def __init__(self, usage_log: UsageLog):
        self.usage_log = usage_log
        self.settled: OrderedDict[tuple[str, str], None] = OrderedDict()
        self.pending: deque[tuple[Any, UsageRecord, str]] = deque()
        self.redis_down_until = 0.0
        self._audit_log: UsageLog | None = None

    @property
    def audit_log(self) -> UsageLog:
        """The admin changes' log beside the usage log (opened on the first change)."""
        if self._audit_log is None:
            self._audit_log = open_audit_log(self.usage_log.settings)
        return self._audit_log

    def first_settle(self, tenant: str, request_id: str) -> bool:
        """True the first time this process settles (tenant, request_id)."""
        key = (tenant, request_id)
        if key in self.settled:
            return False
        self.settled[key] = None
        if len(self.settled) > LOCAL_SETTLED_MAX:
            self.settled.popitem(last=False)
        return True

    def queue_pending(self, tenant: Any, record: UsageRecord, token: str) -> None:
        if len(self.pending) >= PENDING_MAX:
            dropped = self.pending.popleft()[1]
            log.warning("pending settles full; request %s is left to rebuild-ledger", dropped.request_id)
        self.pending.append((tenant, record, token))


_BY_LOG_DIR: dict[str, ReplicaState] = {}


def replica_state(settings: UsageLogSettings) -> ReplicaState:
    """The process-wide state for this usage-log directory (created on first use)."""
    state = _BY_LOG_DIR.get(settings.dir)
    if state is None:
        state = _BY_LOG_DIR[settings.dir] = ReplicaState(UsageLog(settings))
    return state
