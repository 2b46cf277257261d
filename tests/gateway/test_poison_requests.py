"""The breaker counts only the workers' faults: a request that fails the same way on two workers
is the request's (a 400 with the upstream's message, no third attempt, nobody blamed), a 4xx is
a verdict on the request, and the retry budget caps retries in flight."""
from __future__ import annotations

import time

import openai
import pytest

from gateway.config import Failover
from gateway.metrics import METRICS
from gateway.retry_budget import WINDOW_S, RetryBudget
from tests.gateway.gw_helpers import base_config, tier

HI = [{"role": "user", "content": "hi"}]
POISON = "zebra-poison-7"


def _client(gw) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0, timeout=10)


def _closed(gw, *urls) -> bool:
    now = time.monotonic()
    return all(gw.state.pools.backends[u].breaker_state(now) == "closed" and gw.state.pools.backends[u].failures == 0
               for u in urls)


async def test_poison_request_costs_two_attempts_and_leaves_both_workers_healthy(fakes, gateway, redis_prefix):
    (a, a_url), (b, b_url) = await fakes(2)
    a.poison = b.poison = POISON
    gw = await gateway(base_config([tier("t", 1, [a_url, b_url])], redis_prefix,
                                   breaker={"failure_threshold": 2, "open_s": 30}))
    poisoned = [{"role": "user", "content": f"please {POISON}"}]
    async with _client(gw) as client:
        for round_ in range(5):
            with pytest.raises(openai.BadRequestError) as err:
                await client.chat.completions.create(model="t", messages=poisoned)
            assert err.value.body["code"] == "request_failed_upstream"
            assert "tripped on the request" in err.value.body["message"]  # the upstream's own words
            assert len(a.seen) + len(b.seen) == 2 * (round_ + 1)  # two attempts, never a third
            assert _closed(gw, a_url, b_url)
        for _ in range(4):  # everyone else is still served by both workers
            assert (await client.chat.completions.create(model="t", messages=HI)).choices[0].message.content
    assert a.served >= 1 and b.served >= 1


async def test_poison_on_every_tier_stops_after_the_second_tier(fakes, gateway, redis_prefix):
    (a, a_url), (b, b_url), (c, c_url) = await fakes(3)
    for fake in (a, b, c):
        fake.poison = POISON
    gw = await gateway(base_config([tier("small", 1, [a_url]), tier("mid", 2, [b_url]), tier("large", 3, [c_url])],
                                   redis_prefix, failover={"max_attempts": 3}))
    async with _client(gw) as client:
        with pytest.raises(openai.BadRequestError):
            await client.chat.completions.create(model="small", messages=[{"role": "user", "content": POISON}])
    assert (len(a.seen), len(b.seen), len(c.seen)) == (1, 1, 0)
    assert _closed(gw, a_url, b_url, c_url)


async def test_a_5xx_another_worker_does_not_repeat_counts_against_the_worker(fakes, gateway, redis_prefix):
    (bad, bad_url), (good, good_url) = await fakes(2)
    bad.fail_status = 500
    gw = await gateway(base_config([tier("t", 1, [bad_url, good_url])], redis_prefix,
                                   breaker={"failure_threshold": 1, "open_s": 30}))
    async with _client(gw) as client:
        for _ in range(3):
            assert (await client.chat.completions.create(model="t", messages=HI)).choices[0].message.content
    assert gw.state.pools.backends[bad_url].breaker_state(time.monotonic()) == "open"
    assert len(bad.seen) == 1  # open after the first convicted failure: not tried again


async def test_worker_4xx_is_passed_on_and_never_counts(fakes, gateway, redis_prefix):
    (a, a_url), (b, b_url) = await fakes(2)
    gw = await gateway(base_config([tier("t", 1, [a_url, b_url], model="reject-me")], redis_prefix,
                                   breaker={"failure_threshold": 1, "open_s": 30}))
    async with _client(gw) as client:
        for _ in range(6):
            with pytest.raises(openai.NotFoundError) as err:
                await client.chat.completions.create(model="t", messages=HI)
            assert err.value.body["message"] == "model rejected upstream"
    assert len(a.seen) + len(b.seen) == 6  # one attempt each: a verdict is not retried
    assert _closed(gw, a_url, b_url)


async def test_retry_budget_refuses_retries_past_its_share(fakes, gateway, redis_prefix):
    (bad, bad_url), (good, good_url) = await fakes(2)
    bad.fail_status = 502
    gw = await gateway(base_config([tier("t", 1, [bad_url, good_url])], redis_prefix,
                                   failover={"retry_budget_percent": 0, "min_retries_per_s": 0},
                                   breaker={"failure_threshold": 100, "open_s": 30}))
    refused = METRICS.retries_refused.labels("t")._value.get()
    outcomes = set()
    async with _client(gw) as client:
        for _ in range(6):  # the pool alternates: some requests meet the bad worker first
            try:
                await client.chat.completions.create(model="t", messages=HI)
                outcomes.add("ok")
            except openai.APIStatusError as exc:
                assert exc.status_code == 503 and "retry budget spent" in exc.body["message"]
                outcomes.add("refused")
    assert outcomes == {"ok", "refused"} and len(bad.seen) >= 1
    assert METRICS.retries_refused.labels("t")._value.get() > refused


def test_retry_budget_is_a_share_of_recent_requests_plus_a_reserve():
    now = [100.0]
    budget = RetryBudget(clock=lambda: now[0])
    policy = Failover(retry_budget_percent=20, min_retries_per_s=0.5)  # reserve: 5 retries per window
    assert sum(budget.try_retry(policy) for _ in range(10)) == 5  # a quiet gateway still fails over
    for _ in range(50):
        budget.on_request()
    assert sum(budget.try_retry(policy) for _ in range(20)) == 10  # 20% of 50 on top of the reserve
    now[0] += WINDOW_S  # everything counted has left the window
    assert sum(budget.try_retry(policy) for _ in range(10)) == 5
