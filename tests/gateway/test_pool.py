"""pool.py: a worker's breaker (closed, open, half-open with one probe) on a clock the test
gives, the tier's pick by load and prefix affinity, and pools rebuilt on reload keeping the
workers that stay."""
from __future__ import annotations

import time

from gateway.config import Breaker, parse_config
from gateway.core.pool import DOWN, SILENT, UP, Backend, Pools, TierPool
from tests.gateway.gw_helpers import base_config, tier

BREAKER = Breaker(failure_threshold=2, open_s=5.0)
A, B, C = "http://a.test", "http://b.test", "http://c.test"


def _pool(*urls: str) -> TierPool:
    return TierPool("t", [Backend(u) for u in urls])


def _busy(pool: TierPool, **outstanding: int) -> None:
    for backend in pool.backends:
        backend.outstanding = outstanding.get(backend.url.removeprefix("http://").removesuffix(".test"), 0)


def test_the_breaker_opens_after_consecutive_faults_and_a_success_between_resets_the_count():
    backend = Backend(A)
    backend.on_failure(100.0, BREAKER)
    backend.on_success()
    backend.on_failure(101.0, BREAKER)
    assert backend.breaker_state(101.0) == "closed" and backend.available(101.0)
    backend.on_failure(102.0, BREAKER)
    assert backend.breaker_state(102.0) == "open" and not backend.available(106.9)
    assert backend.open_until == 107.0


def test_a_half_open_breaker_lets_one_probe_through_and_its_success_closes_it():
    backend = Backend(A)
    for now in (100.0, 100.5):
        backend.on_failure(now, BREAKER)
    assert backend.breaker_state(105.6) == "half-open" and backend.available(105.6)
    backend.on_pick(105.6)
    assert backend.probing and not backend.available(105.7)  # one probe at a time
    backend.on_done()
    backend.on_success()
    assert backend.breaker_state(105.8) == "closed" and backend.failures == 0 and not backend.probing


def test_a_failed_probe_opens_the_breaker_again():
    backend = Backend(A)
    for now in (100.0, 100.5):
        backend.on_failure(now, BREAKER)
    backend.on_pick(106.0)
    backend.on_failure(106.0, BREAKER)
    assert backend.breaker_state(106.0) == "open" and not backend.probing and backend.open_until == 111.0
    assert backend.available(111.0)  # half-open again after open_s


def test_an_unhealthy_worker_is_never_available_whatever_its_breaker():
    backend = Backend(A)
    backend.healthy = False
    assert backend.breaker_state(0.0) == "closed" and not backend.available(0.0)


def test_a_status_decides_at_once_and_silence_only_when_nothing_was_answered_in_between():
    backend = Backend(A)
    assert backend.after_check(SILENT, 2) and not backend.after_check(SILENT, 2)  # the second silence in a row
    backend.healthy = False
    assert backend.after_check(UP, 2)
    backend.healthy = True
    for _ in range(5):  # silent checks, each after a request the worker answered: busy, not gone
        assert backend.after_check(SILENT, 2)
        backend.on_success()
    assert not backend.after_check(DOWN, 2)  # it says it is down (or refuses the connection): out now
    backend.healthy = False
    assert not backend.after_check(SILENT, 2)  # silence never brings one back


def test_pick_takes_the_least_loaded_available_worker_not_yet_tried():
    pool = _pool(A, B, C)
    _busy(pool, a=3, b=1, c=2)
    assert pool.pick(set(), None, 0).backend.url == B
    assert pool.pick({B}, None, 0).backend.url == C
    pool.backends[2].healthy = False
    assert pool.pick({B}, None, 0).backend.url == A
    assert pool.pick({A, B}, None, 0) is None


def test_idle_workers_take_turns():
    pool = _pool(A, B)
    picks = [pool.pick(set(), None, 0) for _ in range(4)]
    assert [p.backend.url for p in picks] in ([B, A, B, A], [A, B, A, B])
    assert {p.affinity for p in picks} == {"none"}


def test_the_affine_worker_wins_within_the_load_margin_and_loses_past_it():
    pool = _pool(A, B)
    _busy(pool, a=2, b=1)
    hit = pool.pick(set(), A, margin=1)
    assert (hit.backend.url, hit.affinity) == (A, "hit")
    _busy(pool, a=3, b=1)
    spread = pool.pick(set(), A, margin=1)
    assert (spread.backend.url, spread.affinity) == (B, "overloaded")


def test_an_affine_worker_that_is_gone_or_tried_is_a_miss():
    pool = _pool(A, B)
    _busy(pool, a=0, b=1)
    assert (pool.pick(set(), "http://gone.test", 0).affinity, pool.pick({B}, B, 0).affinity) == ("miss", "miss")
    pool.backends[1].open_until = time.monotonic() + 60  # B's breaker open: not a candidate
    miss = pool.pick(set(), B, 0)
    assert (miss.backend.url, miss.affinity) == (A, "miss")


def test_pools_share_a_worker_between_tiers_and_keep_it_across_a_reload():
    doc = base_config([tier("small", 1, [A, B]), tier("large", 2, [B])], "tgtest:pool:")
    pools = Pools(parse_config(doc))
    shared = pools.backends[B]
    assert pools.by_tier["small"].backends[1] is shared and pools.by_tier["large"].backends == [shared]
    shared.outstanding, shared.failures = 2, 1
    doc["tiers"][0]["workers"] = [{"url": B}]
    doc["tiers"][1]["workers"] = [{"url": B}, {"url": C}]
    reloaded = Pools(parse_config(doc), pools)
    assert reloaded.backends[B] is shared and (shared.outstanding, shared.failures) == (2, 1)
    assert set(reloaded.backends) == {B, C}  # a worker no tier lists any more is dropped
    assert reloaded.by_tier["large"].backends == [shared, reloaded.backends[C]]
