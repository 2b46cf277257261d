"""The audit trail of admin changes: one JSONL file per replica beside its usage log
(`audit-<host>-<pid>.jsonl`, rotated like it, never deleted here). Each line is one change as
the audit stream recorded it: its id (the stream's, a total order across replicas), when, who
(the admin key's id), the action, and the record before and after. Records hold the hashes of
secrets, never a secret: the files are enough to rebuild every tenant and key."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

from policies.config import UsageLogSettings
from policies.usage_log import UsageLog, replica_log_name


def entry(who: str, action: str, kind: str, target: str, before: dict | None, after: dict | None) -> dict:
    return {"ts": round(time.time(), 3), "who": who, "action": action, "kind": kind, "target": target,
            "before": before, "after": after}


@dataclass(frozen=True)
class AuditLine:
    id: str
    entry: dict

    def to_json(self) -> str:
        return json.dumps({"id": self.id, **self.entry}, separators=(",", ":"), sort_keys=True)


def open_audit_log(settings: UsageLogSettings) -> UsageLog:
    return UsageLog(settings, "audit-" + replica_log_name().removeprefix("usage-"))


def read_audit(paths: list[str]) -> list[AuditLine]:
    """Every line of the given files, in the order the changes were made; a torn last line is skipped."""
    lines = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for number, text in enumerate(fh, 1):
                if not text.endswith("\n"):
                    break
                try:
                    data = json.loads(text)
                    lines.append(AuditLine(data.pop("id"), data))
                except (ValueError, KeyError) as exc:
                    raise ValueError(f"{path}:{number}: not an audit line: {exc}") from None
    return sorted(lines, key=lambda line: tuple(int(part) for part in line.id.split("-")))
