"""The quality monitor: choose samples, re-ask in the background, score, store, adjust routing.

Request path (all O(1), never awaits): `threshold_shift` is what routing adds to the
classifier's thresholds for a tenant (only that tenant's verdicts move it) (policies/decision.py applies it); `begin` draws the sample (rate from config, or the tenant's policy);
`submit`, after the answer was relayed and accounted, puts it on a bounded queue or drops it
(counted). A fixed number of background tasks do the rest. Any error in here is logged and
counted; it never reaches a client.
"""
from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from typing import Callable

from classifier.outcome_target import DEFAULT_TARGET

from ..core.cascade import ESCALATED, KEPT
from ..core.classify import ClassifierSlot
from ..config import Config
from ..core.metrics import METRICS
from ..core.request import GatewayRequest
from ..core.upstream import Opener
from . import metrics
from .cascade_learning import CascadeCalibrator, CascadeSample
from .config import QualityConfig
from .controller import Controller
from .hotswap import ClassifierSwapper
from .learning import OutcomeLearner
from .reask import ask
from .sample import Sample, digest, features, request_record
from .scorer import Scorer
from .store import QualityStore

log = logging.getLogger(__name__)


def top_tier(config):
    return max(config.tiers, key=lambda t: t.level)


def reference_tier(config, usable: tuple[str, ...], beyond_policy: bool):
    """The tier a request's answer is judged against: the best its tenant may use and that can serve
    it (a verdict is then a pair of tiers the tenant has; None when the decision named none), or the
    top tier where the operator has chosen to re-ask beyond the tenants' policies."""
    if beyond_policy:
        return top_tier(config)
    return max((t for t in config.tiers if t.name in usable), key=lambda t: t.level, default=None)


class QualityMonitor:
    """What it needs of the process, and nothing more: `snapshot` returns the current config
    (tiers, Redis key prefix), `classifier` holds the classifier in use (the swapper replaces
    it), `open_upstream` asks a tier through the gateway's own pools and failover."""

    def __init__(self, snapshot: Callable[[], Config], classifier: ClassifierSlot, open_upstream: Opener,
                 scorer: Scorer | None = None):
        self.snapshot, self.classifier, self.open_upstream = snapshot, classifier, open_upstream
        self.config: QualityConfig = snapshot().quality
        self.controller = Controller()
        self.scorer = scorer or Scorer()
        self.learner = OutcomeLearner(classifier, snapshot)
        self.cascade = CascadeCalibrator()
        self.swapper = ClassifierSwapper(classifier, lambda: self.config.classifier_model_dir, self._swapped)
        self.store: QualityStore | None = None
        self.queue: asyncio.Queue | None = None
        self.counts = {"sampled": 0, "dropped": 0, "passed": 0, "failed": 0, "error": 0}
        self._tasks: list[asyncio.Task] = []
        self._shared_ok = self._learning_ok = self._cascade_ok = True

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self, redis) -> None:
        """`redis`: the process's client, None without Redis (samples are then scored, not stored)."""
        q = self.config
        if redis is not None:
            self.store = QualityStore(redis, self.snapshot().redis.key_prefix)
            self.learner.start(redis, self.snapshot().redis.key_prefix)
            self.cascade.start(redis, self.snapshot().redis.key_prefix)
        if q.classifier_model_dir:
            try:
                await self.swapper.reload("configured classifier_model_dir")
            except Exception:  # logged by the swapper; the packaged/fallback classifier keeps serving
                pass
        self.thresholds_changed()
        self.queue = asyncio.Queue(q.queue_size)
        self._tasks = [asyncio.create_task(self._work()) for _ in range(q.concurrency)]
        self._tasks.append(asyncio.create_task(self._refresh_loop()))
        if q.enabled:
            await self._warm_up()  # before traffic: loading later would compete with requests

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.scorer.close()

    def configure(self, config: QualityConfig) -> None:
        """Config reload: rates, thresholds and storage options apply at once (queue size and
        concurrency keep their start-up values)."""
        self.config = config
        self.thresholds_changed()

    def _swapped(self) -> None:
        self.learner.apply()  # what was learned keeps serving on the new classifier
        self.thresholds_changed()

    def thresholds_changed(self) -> None:
        self.controller.update(self.controller.steps, self.snapshot().tiers, self.config.step,
                               self.classifier.current.thresholds)

    async def _warm_up(self) -> None:
        try:
            await self.scorer.warm_up()
        except Exception:
            log.exception("quality scorer: loading the embedding model failed; samples will count as errors")

    # --- request path -------------------------------------------------------------------

    def threshold_shift(self, tenant: str) -> dict[int, float]:
        return self.controller.shift_of(tenant)

    def cascade_threshold(self, tenant: str):
        """The tenant's calibrated cascade threshold (core/cascade.LiveThreshold), None: its policy's."""
        return self.cascade.threshold_of(tenant)

    def begin(self, request: GatewayRequest) -> Sample | None:
        q, config, route = self.config, request.config, request.route
        if not q.enabled or self.queue is None:
            return None
        rate = route.decision.sampling_rate
        if random.random() >= (q.sampling_rate if rate is None else rate):
            return None
        try:
            usable = route.decision.usable_tiers
            top = reference_tier(config, usable, q.reask_beyond_policy)
            c = route.classification
            candidate, shadow = route.tier, False
            unshifted = route.decision.unshifted_tier
            if unshifted is not None and not request.cascade.runs:
                # moved off a tier by the adjustment: keep measuring that tier (in the background)
                would = config.tier(unshifted)
                if would is not None and would.name != route.tier.name and (
                        q.reask_beyond_policy or would.name in usable):
                    candidate, shadow = would, True
            if top is None or candidate.level >= top.level:
                return None
            predicted = c.tier if c else None  # the classifier's own level: the shift lives in the decision
            return Sample(request_id=request.id, tenant=request.tenant.name,
                          kind=request.kind, body=request.body, route=route, candidate_tier=candidate, shadow=shadow,
                          predicted_level=predicted, reference_tier=top, cascade=_cascade_policy(request))
        except Exception:
            log.exception("quality sampling failed to start")
            return None

    def sample_cached(self, request: GatewayRequest, payloads: tuple[bytes, ...], stream: bool,
                      on_verdict: Callable[[bool], None]) -> None:
        """A semantic cache hit, drawn at the tier's sampling rate: is the cached answer what its
        tier answers to this prompt? The verdict goes to `on_verdict` (the tenant's similarity
        bar), not to the tier's statistics: the tier did not answer this prompt."""
        q, route = self.config, request.route
        rate = route.decision.sampling_rate
        if not q.enabled or self.queue is None or random.random() >= (q.sampling_rate if rate is None else rate):
            return
        sample = Sample(request_id=request.id, tenant=request.tenant.name, kind=request.kind, body=request.body,
                        route=route, candidate_tier=route.tier, shadow=False, predicted_level=None,
                        reference_tier=route.tier, served_tier=route.tier, on_verdict=on_verdict)
        if stream:
            sample.events = list(payloads)
        else:
            sample.served_body = payloads[0]
        try:
            self.queue.put_nowait(sample)
            self._count(sample, "sampled")
        except asyncio.QueueFull:
            self._count(sample, "dropped")

    def submit(self, sample: Sample, outcome) -> None:
        """`outcome`: the request's relay.Outcome; only a clean 200 answer is worth judging."""
        try:
            opened = outcome.opened
            if opened is None or opened.response.status != 200:
                return
            if outcome.stream and (outcome.cut or outcome.stream_error or sample.overflow):
                return
            sample.served_tier = opened.tier
            if not outcome.stream:
                sample.served_body = opened.body
            self._take_cascade(sample, outcome.cascade)
            if not sample.shadow and opened.tier.name != sample.candidate_tier.name:
                sample.candidate_tier = opened.tier  # failover served it elsewhere: judge that tier
                if opened.tier.level >= sample.reference_tier.level:
                    return
            try:
                self.queue.put_nowait(sample)
                self._count(sample, "sampled")
            except asyncio.QueueFull:
                self._count(sample, "dropped")
            metrics.QUEUE_DEPTH.set(self.queue.qsize())
        except Exception:
            log.exception("quality sample could not be queued")

    def _take_cascade(self, sample: Sample, verdict) -> None:
        """A cascade that judged its first answer's confidence gives a calibration verdict. Escalated,
        the first answer was dropped: the first tier is re-asked in the background, as for a request
        moved off its tier, and the served answer judged too unless it is the reference."""
        policy, sample.cascade = sample.cascade, None
        if policy is None or verdict is None or verdict.confidence is None or verdict.outcome not in (KEPT, ESCALATED):
            return
        first = self.snapshot().tier(verdict.first_tier)
        if first is None or first.level >= sample.reference_tier.level:
            return
        sample.cascade = CascadeSample(verdict, *policy)
        if verdict.outcome == ESCALATED:
            sample.candidate_tier, sample.shadow = first, True

    def _count(self, sample: Sample, result: str) -> None:
        self.counts[result] += 1
        metrics.SAMPLES.labels(sample.candidate_tier.name, result).inc()

    # --- background ---------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            sample = await self.queue.get()
            metrics.QUEUE_DEPTH.set(self.queue.qsize())
            try:
                await self._process(sample)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._count(sample, "error")
                log.warning("quality sample %s failed: %s: %s", sample.request_id, type(exc).__name__, exc)

    async def _process(self, sample: Sample) -> None:
        q, config = self.config, self.snapshot()
        top, candidate_tier = config.tier(sample.reference_tier.name), config.tier(sample.candidate_tier.name)
        if candidate_tier is None or top is None:
            gone = sample.candidate_tier.name if candidate_tier is None else sample.reference_tier.name
            raise LookupError(f"tier {gone} is gone after a reload")
        if sample.on_verdict is not None:
            await self._judge_cached(sample, candidate_tier)
            return
        if sample.shadow:
            candidate = await self._ask(sample, candidate_tier)
            served_top = sample.served_tier.level >= top.level
            reference = sample.served_answer() if served_top else await self._ask(sample, top)
        else:
            candidate = sample.served_answer()
            reference = await self._ask(sample, top)
        verdict = await self.scorer.score(candidate, reference, q.similarity_threshold)
        tier = candidate_tier.name
        self._count(sample, "passed" if verdict.passed else "failed")
        metrics.SIMILARITY.labels(tier).observe(verdict.similarity)
        for check in verdict.checks_failed:
            metrics.CHECK_FAILURES.labels(tier, check).inc()
        await self._learn(sample, candidate_tier.level, verdict.passed, top.level)
        await self._calibrate(sample, verdict.passed, reference, top)
        if self.store is None:
            return
        fields = {
            "request_id": sample.request_id, "tenant": sample.tenant, "kind": sample.kind,
            "tier": tier, "tier_level": candidate_tier.level, "reference_tier": top.name, "reference_level": top.level,
            "served_tier": sample.served_tier.name, "shadow": int(sample.shadow),
            "predicted_level": sample.predicted_level or "",
            "scores": _scores(sample.route.classification),
            "features": _json(features(sample.route, sample.body)),
            "candidate_sha": digest(candidate.text), "candidate_chars": len(candidate.text),
            "candidate_tokens": candidate.completion_tokens, "candidate_finish": candidate.finish_reason or "",
            "reference_sha": digest(reference.text), "reference_chars": len(reference.text),
            "reference_tokens": reference.completion_tokens, "reference_finish": reference.finish_reason or "",
            "similarity": verdict.similarity, "verdict": "pass" if verdict.passed else "fail",
            "checks_failed": ",".join(verdict.checks_failed), "time": round(time.time(), 3),
        }
        if q.store_requests:
            fields["request"] = request_record(sample.body, q.max_request_chars) or ""
        if q.store_answers:
            fields["candidate_text"], fields["reference_text"] = candidate.text, reference.text
        try:
            await self.store.add_sample(fields, q.stream_maxlen)
            recorded = await self.store.record(sample.tenant, tier, sample.predicted_level, not verdict.passed, q)
        except Exception as exc:  # Redis trouble costs the sample, never the client
            METRICS.redis_errors.labels("quality").inc()
            log.warning("quality store unavailable: %s: %s", type(exc).__name__, exc)
            return
        metrics.FAILURE_RATE.labels(tier).set(recorded.failure_rate)
        if recorded.changed:
            metrics.CHANGES.labels(tier, "raise" if recorded.changed > 0 else "relax").inc()
            log.warning("quality: tenant %s, tier %s adjustment %s to step %d (failure rate %.3f over %d samples)",
                        sample.tenant, tier, "raised" if recorded.changed > 0 else "relaxed", recorded.step,
                        recorded.failure_rate, recorded.window_size)
            await self.refresh()

    async def _judge_cached(self, sample: Sample, tier) -> None:
        reference = await self._ask(sample, tier)
        verdict = await self.scorer.score(sample.served_answer(), reference, self.config.similarity_threshold)
        self._count(sample, "passed" if verdict.passed else "failed")
        sample.on_verdict(verdict.passed)

    async def _learn(self, sample: Sample, level: int, passed: bool, top_level: int) -> None:
        """The verdict as an outcome: `level` passed or not, the top tier (the reference) did. With keys,
        only where the operator lets every tenant's verdicts train the models all tenants route on."""
        if not self.config.learn_from_outcomes or (
                self.snapshot().policies.keyed and not self.config.learn_across_tenants):
            return
        try:
            request = {k: sample.body[k] for k in ("messages", "prompt") if k in sample.body}
            entry = self.learner.entry(request, {level: passed, top_level: True}, self.config.heldout_share,
                                       sample.tenant)
            if entry is not None:
                await self.learner.add([entry], "monitor")
        except Exception as exc:  # Redis trouble costs the outcome, never the client
            METRICS.redis_errors.labels("quality").inc()
            log.warning("outcome not recorded: %s: %s", type(exc).__name__, exc)

    async def _calibrate(self, sample: Sample, cheap_good: bool, reference, top) -> None:
        """A cascaded answer's verdict row: the first answer judged, and the one above when it was served
        and is not the reference itself (then it counts as right)."""
        if sample.cascade is None or sample.candidate_tier.name != sample.cascade.verdict.first_tier:
            return
        strong_good = None
        if sample.cascade.verdict.outcome == ESCALATED and sample.served_tier.level < top.level:
            strong_good = (await self.scorer.score(sample.served_answer(), reference,
                                                   self.config.similarity_threshold)).passed
        try:
            await self.cascade.record(sample.tenant, sample.request_id, sample.cascade, cheap_good, strong_good,
                                      self.config)
        except Exception as exc:  # Redis trouble costs the verdict, never the client
            METRICS.redis_errors.labels("quality").inc()
            log.warning("cascade verdict not recorded: %s: %s", type(exc).__name__, exc)

    async def _ask(self, sample: Sample, tier):
        return await ask(self.open_upstream, self.snapshot(), sample, tier, self.config.reference_max_tokens)

    async def refresh(self) -> None:
        """Re-read the shared adjustment steps (other replicas may have changed them)."""
        if self.store is None:
            return
        try:
            steps = await self.store.steps()
        except Exception as exc:
            METRICS.redis_errors.labels("quality").inc()
            if self._shared_ok:  # log the outage once, not every refresh
                log.warning("quality: reading shared adjustments failed: %s: %s", type(exc).__name__, exc)
            self._shared_ok = False
            return
        if not self._shared_ok:
            log.warning("quality: shared adjustments readable again")
        self._shared_ok = True
        self.controller.update(steps, self.snapshot().tiers, self.config.step, self.classifier.current.thresholds)

    async def _refresh_loop(self) -> None:
        while True:
            await self.refresh()
            try:
                await self.swapper.poll()
            except Exception:
                log.exception("classifier watch failed")
            try:
                await self.learner.poll()
                self._learning_ok = True
            except Exception as exc:
                if self._learning_ok:  # log an outage once, not every refresh
                    log.warning("outcome learning paused: %s: %s", type(exc).__name__, exc)
                self._learning_ok = False
            try:
                await self.cascade.poll(self.config)
                self._cascade_ok = True
            except Exception as exc:
                if self._cascade_ok:
                    log.warning("cascade calibration paused: %s: %s", type(exc).__name__, exc)
                self._cascade_ok = False
            await asyncio.sleep(self.config.refresh_s)


def _cascade_policy(request: GatewayRequest) -> tuple[float, float] | None:
    """(quality target, policy threshold) of a request whose cascade runs and calibrates; else None."""
    if not request.cascade.runs:
        return None
    policy = getattr(request.tenant, "policy", None) or request.config.policies.defaults
    if not policy.routing.cascade.calibrate:
        return None
    target = policy.quality_target
    return (DEFAULT_TARGET if target is None else target), policy.routing.cascade.threshold


def _json(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _scores(classification) -> str:
    scores = classification.scores if classification is not None else None
    return _json([round(s, 4) for s in scores]) if scores else ""
