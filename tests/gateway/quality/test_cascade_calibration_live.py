"""The cascade's threshold calibrated live, per tenant, from verdicts on its cascaded answers
(gateway/quality/cascade_learning.py) in the shared Redis, with the router's guard."""
from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from gateway.core.cascade import ESCALATED, KEPT, CascadeVerdict, LiveThreshold
from gateway.quality.cascade_learning import CEILING, CascadeCalibrator, CascadeSample
from gateway.quality.cascade_store import CascadeVerdictRow
from gateway.quality.config import QualityConfig
from tests.support import SHARED_REDIS

Q = QualityConfig(cascade_min_verdicts=100, cascade_calibrate_every=20, min_heldout=20, heldout_share=0.25)
STATIC = 0.0
CONFIDENCES = [0.25 * i for i in range(40)]  # 0 .. 9.75 nats
LAST_WRONG = 5.75  # the highest confidence of a wrong answer when answers are right from 6 nats


def _rows(good_from: float, heldout_good_from: float | None = None, repeat: int = 5) -> list[CascadeVerdictRow]:
    """Verdicts over CONFIDENCES: the cheap answer right at or above `good_from`, the tier above always
    right; every fourth held out (there right from `heldout_good_from`, if given)."""
    rows = []
    for n in range(repeat):
        for i, c in enumerate(CONFIDENCES):
            held = (n * len(CONFIDENCES) + i) % 4 == 0
            bar = heldout_good_from if held and heldout_good_from is not None else good_from
            rows.append(CascadeVerdictRow(c, c >= bar, True, held, 0.95, STATIC))
    return rows


@pytest.fixture
async def calibrator(redis_prefix):
    client = aioredis.from_url(SHARED_REDIS)

    def make() -> CascadeCalibrator:  # one per replica: each reads the same Redis
        c = CascadeCalibrator()
        c.start(client, redis_prefix)
        return c
    yield make
    await client.aclose()


async def _add(calibrator: CascadeCalibrator, tenant: str, rows) -> None:
    for row in rows:
        await calibrator.store.add(tenant, row, Q.cascade_verdicts_kept)


async def test_confident_answers_judged_wrong_raise_the_threshold_once_the_guard_accepts(calibrator):
    c = calibrator()
    await _add(c, "a", _rows(good_from=6.0))
    await c.poll(Q)
    live = c.threshold_of("a")
    assert live is not None and LAST_WRONG < live.threshold <= CEILING  # keeps no wrong answer and live.verdicts == 200
    assert c.history[-1]["result"] == "accepted" and c.history[-1]["serving_threshold"] == STATIC
    assert c.status()["tenants"]["a"] == {"verdicts_recorded": 200, "threshold": live.threshold,
                                           "source": "calibrated", "verdicts": 200, "at_ms": live.at_ms}
    other = calibrator()  # another replica serves what the guard accepted, without deciding again
    other.decided_at["a"] = 200
    await other.poll(Q)
    assert other.threshold_of("a") == live


async def test_a_candidate_the_held_out_verdicts_refute_leaves_the_serving_threshold(calibrator):
    c = calibrator()
    serving = LiveThreshold(7.0, 150, 1)
    await c.store.set_live("a", serving)
    # the fitted verdicts say every answer is right (a candidate at the floor would keep them all);
    # the held-out ones say answers under 6 nats are wrong
    await _add(c, "a", _rows(good_from=-1.0, heldout_good_from=6.0))
    await c.poll(Q)
    decided = c.history[-1]
    assert decided["result"] == "refused" and decided["target_met"] is False
    assert decided["candidate_threshold"] < 6.0 and decided["serving_threshold"] == 7.0
    assert c.threshold_of("a") == serving


async def test_one_tenants_verdicts_never_move_anothers_threshold(calibrator):
    c = calibrator()
    await _add(c, "b", _rows(good_from=-1.0)[:30])  # b: a few verdicts of its own, all right
    await _add(c, "a", _rows(good_from=6.0))
    await c.poll(Q)
    assert c.threshold_of("a").threshold > LAST_WRONG
    assert c.threshold_of("b") is None and c.status()["tenants"]["b"] == {"verdicts_recorded": 30,
                                                                          "source": "static"}
    assert all(h["tenant"] == "a" for h in c.history)


async def test_too_few_verdicts_keep_the_static_threshold(calibrator):
    c = calibrator()
    await _add(c, "a", _rows(good_from=6.0)[:Q.cascade_min_verdicts - 1])
    await c.poll(Q)
    assert c.threshold_of("a") is None and not c.history
    assert c.status()["tenants"]["a"]["source"] == "static"


async def test_recorded_verdicts_are_split_by_request_and_bounded_per_tenant(calibrator):
    c = calibrator()
    q = QualityConfig(cascade_verdicts_kept=50, cascade_min_verdicts=10, heldout_share=0.25)
    kept = CascadeSample(CascadeVerdict(KEPT, "confident", "small", 3.0), 0.9, STATIC)
    empty = CascadeSample(CascadeVerdict(ESCALATED, "low_confidence", "small", float("-inf")), 0.9, STATIC)
    for n in range(60):
        await c.record("a", f"req-{n}", kept, True, None, q)
    await c.record("a", "req-empty", empty, False, True, q)
    rows = await c.store.verdicts("a")
    assert len(rows) == 50 and rows[-1] == CascadeVerdictRow(-1e6, False, True, rows[-1].heldout, 0.9, STATIC)
    assert 0 < sum(r.heldout for r in rows) < 50  # by a hash of the request id: some, not all
    again = [(await c.store.verdicts("a"))[i].heldout for i in range(50)]
    assert again == [r.heldout for r in rows]
