"""Online learning of the per-tier outcome models (classifier/outcome_model.py), with a guard.

Every outcome (a monitor verdict, or a line of an uploaded outcome file) becomes one entry of a
capped Redis stream. A share of entries, chosen by a hash of the request's features, is held out
and never learned from. Every replica reads the stream in order and decides alike: after
`learn_every` new learning entries, a candidate is fitted on all accepted entries plus those. It
replaces the serving outcome model only if, replayed on the held-out entries, it saves at least as
much at the same quality target (classifier/replay.py); a refused batch is dropped. A restarted
replica replays the stream and reaches the same model. Without Redis this runs in memory.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core.classify import ClassifierSlot, OnnxComplexityClassifier
from ..config import Config
from . import metrics

log = logging.getLogger(__name__)
READ_PAGE = 1000
HELDOUT_KEPT = 5000  # newest held-out entries the guard replays on


@dataclass(frozen=True)
class Entry:
    numeric: np.ndarray  # the classifier's feature row
    probs: np.ndarray    # the classifier's class probabilities when the outcome was recorded
    known: np.ndarray    # PASS / FAIL / UNKNOWN per level
    heldout: bool
    tenant: str = ""  # whose request it was ("": the operator's, e.g. an uploaded outcome file)

    def fields(self) -> dict:
        return {"n": base64.b64encode(self.numeric.astype(np.float32).tobytes()).decode(),
                "p": json.dumps([round(float(x), 6) for x in self.probs]),
                "k": json.dumps(self.known.tolist()), "h": int(self.heldout), "t": self.tenant}

    @classmethod
    def parse(cls, raw: dict) -> "Entry":
        fields = {_text(k): _text(v) for k, v in raw.items()}
        return cls(np.frombuffer(base64.b64decode(fields["n"]), np.float32), np.asarray(json.loads(fields["p"])),
                   np.asarray(json.loads(fields["k"]), np.int8), fields["h"] == "1", fields.get("t", ""))


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def level_costs(config: Config) -> np.ndarray:
    """[4] price per level (input + output per million tokens of the cheapest tier there); a level
    without a tier costs what the next level up does."""
    prices = {}
    for tier in config.tiers:
        pair = tier.price_per_mtok.input + tier.price_per_mtok.output
        prices[tier.level] = min(pair, prices.get(tier.level, pair))
    out, above = [], max(prices.values()) if prices else 1.0
    for level in (4, 3, 2, 1):
        above = prices.get(level, above)
        out.append(above)
    return np.asarray(out[::-1], float)


def memory_owner(entry: Entry, config: Config) -> str:
    """Whose nearest-outcome memory an outcome joins: its tenant's, or the shared one for the
    operator's own outcomes and, with quality.outcome_memory 'shared', everyone's."""
    return "" if config.quality.outcome_memory == "shared" else entry.tenant


def fit_entries(rows: list[Entry], in_play: np.ndarray, config: Config):
    """A candidate OutcomeModel with its quality target calibrated (in an executor thread: the first
    call imports scikit-learn, which would stall the event loop for a second)."""
    from classifier.outcome_fit import fit_calibrated
    from classifier.outcome_model import CAPACITY
    from classifier.static_vectors import DIMS

    return fit_calibrated(np.vstack([e.numeric for e in rows]), np.vstack([e.probs for e in rows]),
                          np.vstack([e.known for e in rows]), DIMS, in_play, CAPACITY,
                          owners=[memory_owner(e, config) for e in rows],
                          tenant_rows=config.quality.outcome_rows_per_tenant,
                          tenants=config.quality.outcome_memory_tenants)


def judge(serving, candidate, heldout: list[Entry], costs: np.ndarray, in_play: np.ndarray, thresholds,
          config: Config) -> dict:
    """Replay both outcome models (serving None: the classifier alone) on the held-out entries, each
    at its own operating point: its calibrated threshold for the default quality target, else
    `thresholds` (the classifier's); each entry reads the memory its tenant's requests would."""
    from classifier.outcome_model import OutcomeModel
    from classifier.outcome_target import DEFAULT_TARGET
    from classifier.replay import Outcomes, meets_target, no_worse, report
    from classifier.static_vectors import DIMS

    serving = serving or OutcomeModel.empty(len(heldout[0].numeric), DIMS)

    numeric = np.vstack([e.numeric for e in heldout]).astype(np.float64)
    probs = np.vstack([e.probs for e in heldout])
    data = Outcomes(np.vstack([e.known for e in heldout]), np.tile(costs, (len(heldout), 1)), in_play)
    tenants = [memory_owner(e, config) for e in heldout]

    def replayed(model) -> dict:
        tau = model.threshold_for(DEFAULT_TARGET) if model.learned else None
        # routing reads the gain forgone: 1 - need takes p_good's place in the replay
        need = model.assess_each(numeric, probs, DIMS, tenants).need
        return report(1 - need, data, thresholds if tau is None else [tau] * 3)

    s, c = replayed(serving), replayed(candidate)
    target_met = candidate.targets is None or bool(meets_target(c, data, DEFAULT_TARGET))
    return {"heldout": len(heldout), "serving": s, "candidate": c, "target_met": target_met,
            "accepted": no_worse(c, s) and target_met}


class OutcomeLearner:
    def __init__(self, slot: ClassifierSlot, snapshot: Callable[[], Config]):
        self.slot, self.snapshot = slot, snapshot
        self.redis, self.key, self.last_id = None, None, "0-0"
        self.learned: list[Entry] = []
        self.pending: list[Entry] = []
        self.heldout: deque[Entry] = deque(maxlen=HELDOUT_KEPT)
        self.model = None  # the serving OutcomeModel, once one was accepted
        self.history: deque[dict] = deque(maxlen=20)
        self.counts = {"outcomes": 0, "swapped": 0, "refused": 0}
        self._local: list[Entry] = []  # without Redis: entries waiting for the next poll
        self._lock = asyncio.Lock()

    def start(self, redis, prefix: str) -> None:
        self.redis, self.key = redis, prefix + "quality:outcomes"

    def _base(self):
        current = self.slot.current
        return current.model if isinstance(current, OnnxComplexityClassifier) else None

    # --- writing ------------------------------------------------------------------------

    def entry(self, request: dict, outcomes: dict[int, bool], heldout_share: float, tenant: str = "") -> Entry | None:
        """None when the classifier in use is a rule (it has no features to learn on); `tenant`: whose
        request it was ("": the operator's)."""
        from classifier.features import extract
        from classifier.outcome_model import known_levels

        base = self._base()
        if base is None:
            return None
        text, numeric = extract(request.get("messages"), request.get("prompt"))
        probs = base.probabilities([text], numeric[None, :])[0]
        roll = int(hashlib.sha256(numeric.tobytes()).hexdigest()[:8], 16) / 16 ** 8
        return Entry(numeric, probs, known_levels(outcomes), roll < heldout_share, tenant)

    async def add(self, entries: list[Entry], source: str) -> None:
        q = self.snapshot().quality
        if self.redis is None:
            self._local = (self._local + entries)[-q.outcomes_maxlen:]
        else:
            async with self.redis.pipeline(transaction=False) as pipe:
                for e in entries:
                    pipe.xadd(self.key, e.fields(), maxlen=q.outcomes_maxlen, approximate=True)
                await pipe.execute()
        self.counts["outcomes"] += len(entries)
        metrics.ROUTER_OUTCOMES.labels(source).inc(len(entries))

    # --- reading and deciding -----------------------------------------------------------

    async def poll(self) -> None:
        """Take every entry written since the last poll, in stream order, deciding as batches fill."""
        async with self._lock:
            while True:
                if self.redis is None:
                    fresh, self._local = self._local, []
                else:
                    page = await self.redis.xrange(self.key, min="(" + self.last_id, count=READ_PAGE)
                    if page:
                        self.last_id = _text(page[-1][0])
                    fresh = [Entry.parse(fields) for _, fields in page]
                for e in fresh:
                    await self._take(e)
                if len(fresh) < READ_PAGE:
                    return

    async def _take(self, e: Entry) -> None:
        if e.heldout:
            self.heldout.append(e)
            return
        q = self.snapshot().quality
        self.pending = (self.pending + [e])[-q.outcomes_maxlen:]  # bounded while no held-out outcomes exist
        if len(self.pending) >= q.learn_every and len(self.heldout) >= q.min_heldout:
            await self._decide()

    async def _decide(self) -> None:
        from classifier.outcome_target import DEFAULT_TARGET

        base, batch = self._base(), self.pending
        self.pending = []
        if base is None:
            return
        config = self.snapshot()
        in_play = np.array(sorted({t.level for t in config.tiers}))
        if len(in_play) < 2:
            return  # one tier level: there is no routing to learn
        rows = (self.learned + batch)[-config.quality.outcomes_maxlen:]
        loop = asyncio.get_running_loop()
        candidate = await loop.run_in_executor(None, fit_entries, rows, in_play, config)
        thresholds = [base.thresholds[k] for k in (2, 3, 4)]
        verdict = await loop.run_in_executor(None, judge, self.model, candidate, list(self.heldout),
                                             level_costs(config), in_play, thresholds, config)
        result = "swapped" if verdict["accepted"] else "refused"
        if verdict["accepted"]:
            self.learned, self.model = rows, candidate
            self.apply()
        self.counts[result] += 1
        metrics.ROUTER_CANDIDATES.labels(result).inc()
        event = {"result": result, "batch": len(batch), "learned": len(self.learned), "at_ms": int(time.time() * 1000),
                 "heldout": verdict["heldout"],
                 "savings_at_95pct": {"serving": verdict["serving"]["savings_at_95pct"],
                                      "candidate": verdict["candidate"]["savings_at_95pct"]},
                 "apgr": {"serving": verdict["serving"]["apgr"], "candidate": verdict["candidate"]["apgr"]},
                 "quality_target_met": verdict["target_met"],
                 "default_threshold": candidate.threshold_for(DEFAULT_TARGET)}
        self.history.append(event)
        log.warning("router candidate %s: %d new outcomes; on %d held out, savings at 95%% quality %.3f "
                    "(serving %.3f)", result, len(batch), verdict["heldout"],
                    verdict["candidate"]["savings_at_95pct"], verdict["serving"]["savings_at_95pct"])

    def apply(self) -> None:
        """Serve the accepted outcome model on the classifier in use (after a hot swap too)."""
        base = self._base()
        if base is not None and self.model is not None and base.outcomes is not self.model:
            self.slot.current = OnnxComplexityClassifier(base.with_outcomes(self.model))

    def status(self) -> dict:
        return {**self.counts, "learned": len(self.learned), "pending": len(self.pending),
                "heldout": len(self.heldout), "history": list(self.history)}
