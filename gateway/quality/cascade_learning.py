"""Each tenant's cascade threshold, calibrated on its own verdicts with the router's guard.

The monitor records a verdict per judged cascaded answer (cascade_store.py). Every
`cascade_calibrate_every` new verdicts of a tenant, once it has `cascade_min_verdicts`, a
candidate is calibrated (classifier/cascade_calibration.calibrate_threshold) on the verdicts not
held out, at the tenant's quality target, and replayed with `guard` on the held-out ones against
the serving threshold (the last accepted, else the policy's). An accepted candidate is written
to Redis and every replica serves it from `live`, a dict swapped whole: requests read it without
a Redis call. A tenant's threshold is only ever computed from that tenant's verdicts.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import deque
from dataclasses import dataclass

from classifier.cascade_calibration import calibrate_threshold, guard
from classifier.cascade_confidence import MAX_MARGIN

from ..core.cascade import CascadeVerdict, LiveThreshold
from .cascade_store import CascadeStore, CascadeVerdictRow

log = logging.getLogger(__name__)
# A calibrated threshold stays within the confidence's own range: at the ceiling only answers whose
# every token is at least MAX_MARGIN nats ahead are kept (calibrate_threshold's "always escalate").
FLOOR, CEILING = -MAX_MARGIN, MAX_MARGIN


@dataclass(frozen=True)
class CascadeSample:
    """What a sampled cascaded request needs for its verdict row."""
    verdict: CascadeVerdict  # kept or escalated, with the first answer's confidence
    target: float            # the tenant's quality target
    static: float            # the tenant's policy threshold


def clamp(threshold: float) -> float:
    return min(CEILING, max(FLOOR, threshold))


def heldout(request_id: str, share: float) -> bool:
    return int(hashlib.sha256(request_id.encode()).hexdigest()[:8], 16) / 16 ** 8 < share


def decide(rows: list[CascadeVerdictRow], serving: float, min_verdicts: int, min_heldout: int) -> dict | None:
    """The guard's verdict on a candidate for these rows (a tenant's, oldest first); None when
    there are too few to calibrate or to replay on."""
    fit = [r for r in rows if not r.heldout]
    held = [r for r in rows if r.heldout]
    if len(rows) < min_verdicts or len(held) < min_heldout or len(fit) < 2:
        return None
    target = rows[-1].target  # the tenant's newest target

    def columns(some):
        return [r.confidence for r in some], [r.cheap_good for r in some], [r.strong_good for r in some]

    candidate = clamp(calibrate_threshold(*columns(fit), target=target))
    verdict = guard(serving, candidate, *columns(held), target=target)
    return {**verdict, "candidate_threshold": candidate, "serving_threshold": serving, "target": target,
            "fit": len(fit), "verdicts": len(rows)}


class CascadeCalibrator:
    def __init__(self):
        self.store: CascadeStore | None = None
        self.live: dict[str, LiveThreshold] = {}  # tenant -> its accepted threshold; swapped whole
        self.verdict_counts: dict[str, int] = {}
        self.decided_at: dict[str, int] = {}  # tenant -> its verdict count when last decided here
        self.history: deque[dict] = deque(maxlen=20)
        self.counts = {"recorded": 0, "accepted": 0, "refused": 0}

    def start(self, redis, prefix: str) -> None:
        self.store = CascadeStore(redis, prefix)

    def threshold_of(self, tenant: str) -> LiveThreshold | None:
        return self.live.get(tenant)

    async def record(self, tenant: str, request_id: str, sample: CascadeSample, cheap_good: bool,
                     strong_good: bool | None, q) -> None:
        if self.store is None:
            return
        confidence = max(sample.verdict.confidence, -1e6)  # an empty answer's -inf: JSON has no infinity
        row = CascadeVerdictRow(confidence, cheap_good, strong_good, heldout(request_id, q.heldout_share),
                                sample.target, sample.static)
        await self.store.add(tenant, row, q.cascade_verdicts_kept)
        self.counts["recorded"] += 1

    async def poll(self, q) -> None:
        """Read every tenant's verdict count and accepted threshold; decide for those with enough new."""
        if self.store is None:
            return
        state = await self.store.counts_and_live(await self.store.tenants())
        live = {t: accepted for t, (_, accepted) in state.items() if accepted is not None}
        for tenant, (count, accepted) in state.items():
            if count - self.decided_at.get(tenant, 0) < q.cascade_calibrate_every or count < q.cascade_min_verdicts:
                continue
            self.decided_at[tenant] = count
            rows = await self.store.verdicts(tenant)
            serving = accepted.threshold if accepted is not None else rows[-1].static if rows else 0.0
            verdict = await asyncio.get_running_loop().run_in_executor(  # off the event loop: numpy over all rows
                None, decide, rows, serving, q.cascade_min_verdicts, q.min_heldout)
            if verdict is None:
                continue
            result = "accepted" if verdict["accepted"] else "refused"
            self.counts[result] += 1
            if verdict["accepted"]:
                live[tenant] = LiveThreshold(verdict["candidate_threshold"], len(rows), int(time.time() * 1000))
                await self.store.set_live(tenant, live[tenant])
            self.history.append({"tenant": tenant, "result": result, "at_ms": int(time.time() * 1000),
                                 **{k: verdict[k] for k in ("candidate_threshold", "serving_threshold", "target",
                                                            "fit", "heldout", "verdicts", "target_met")}})
            log.warning("cascade threshold for tenant %s %s: %.4f (serving %.4f) on %d verdicts, %d held out",
                        tenant, result, verdict["candidate_threshold"], serving, len(rows), verdict["heldout"])
        self.live, self.verdict_counts = live, {t: count for t, (count, _) in state.items()}

    def status(self) -> dict:
        """Each tenant with verdicts: the threshold it is served and where it came from."""
        tenants = {t: {"verdicts_recorded": n, **({"threshold": self.live[t].threshold, **self.live[t].provenance()}
                                                  if t in self.live else {"source": "static"})}
                   for t, n in self.verdict_counts.items()}
        return {**self.counts, "tenants": tenants, "history": list(self.history)}
