"""The monitor inside a real gateway (in-process) in front of fake upstreams, with the real ONNX
classifier, the real MiniLM scorer and the shared Redis.

The fake upstream answers "w0 w1 ... w{n-1}" for max_tokens n, so a tier capped at one token
gives a visibly worse (shorter, truncated) answer than the top tier.
"""
from __future__ import annotations

import asyncio

from tests.gateway.quality.quality_helpers import EASY, step_to_leave_tier_1, two_tier_config
from tests.support import wait_for
from tests.support.metrics import metric

QUALITY = {"sampling_rate": 1.0, "window": 10, "min_samples": 5, "trigger": 0.3, "recover": 0.15,
           "step": step_to_leave_tier_1(), "max_steps": 1, "refresh_s": 0.2, "store_requests": True}


async def _chat(http, gw, content: str, model: str = "auto", stream: bool = False, max_tokens: int = 4):
    body = {"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": content}]}
    if stream:
        body["stream"] = True
    async with http.post(gw.url + "/v1/chat/completions", json=body) as r:
        assert r.status == 200, await r.text()
        await r.read()
        return r.headers["x-tiergate-tier"]


async def _routes(http, gw) -> list[str]:
    out = []
    for content in EASY:
        async with http.post(gw.url + "/v1/route", json={"model": "auto", "messages": [
                {"role": "user", "content": content}]}) as r:
            out.append((await r.json())["tier"])
    return out


async def _quality(http, gw) -> dict:
    async with http.get(gw.url + "/v1/quality") as r:
        assert r.status == 200
        return await r.json()


async def test_failing_tier_is_detected_shifted_away_and_restored(fakes, gateway, redis_prefix, http):
    (small, small_url), (top, top_url) = await fakes(2)
    doc = two_tier_config(small_url, top_url, redis_prefix, QUALITY, small_cap=1)
    gw = await gateway(doc)
    assert await _routes(http, gw) == ["small"] * len(EASY)

    for content in EASY[:6]:
        assert await _chat(http, gw, content) == "small"

    async def raised():
        q = await _quality(http, gw)
        return q if q["tiers"]["small"]["adjustment_steps"] == 1 else None
    q = await wait_for(raised)
    assert q["tiers"]["small"]["recent"]["failed"] >= 5
    assert "truncated" in q["tiers"]["small"]["recent"]["checks_failed"]
    assert q["changes"][0]["tier"] == "small" and "above the trigger" in q["changes"][0]["reason"]
    await wait_for(lambda: _all_routed(http, gw, "top"))  # traffic moved up

    # fault removed by a config hot reload; moved requests keep the small tier measured (shadow samples)
    gw.rewrite(two_tier_config(small_url, top_url, redis_prefix, QUALITY))
    await wait_for(lambda: _cap_gone(gw), timeout_s=10)
    served_before = small.served
    for content in EASY[:7]:
        assert await _chat(http, gw, content) == "top"

    async def relaxed():
        q = await _quality(http, gw)
        return q if q["tiers"]["small"]["adjustment_steps"] == 0 else None
    q = await wait_for(relaxed)
    assert small.served > served_before  # the shadow re-asks went to the small tier
    assert "below the recover level" in q["changes"][0]["reason"]
    assert await _routes(http, gw) == ["small"] * len(EASY)

    async with http.get(gw.url + "/metrics") as r:
        text = await r.text()
    assert metric(text, "tiergate_quality_samples_total", tier="small", result="failed") >= 5
    assert metric(text, "tiergate_quality_samples_total", tier="small", result="passed") >= 5
    assert metric(text, "tiergate_quality_threshold_changes_total", tier="small", direction="raise") == 1
    assert metric(text, "tiergate_quality_adjustment_steps", tier="small") == 0
    assert metric(text, "tiergate_classifier_threshold", level="2") > 0.1


async def test_streamed_answers_are_sampled_and_top_tier_never(fakes, gateway, redis_prefix, http):
    (small, small_url), (top, top_url) = await fakes(2)
    gw = await gateway(two_tier_config(small_url, top_url, redis_prefix, QUALITY))
    assert await _chat(http, gw, "Say hello.", stream=True) == "small"
    assert await _chat(http, gw, "Say hello.", model="top") == "top"
    q = await wait_for(lambda: _sampled(http, gw, 1))
    assert q["local_counts"]["sampled"] == 1  # the top tier's answer was not sampled
    assert q["tiers"]["small"]["recent"] == {"samples": 1, "failed": 0, "failure_rate": 0.0,
                                             "mean_similarity": 1.0, "checks_failed": {}}
    reasks = [s for s in top.seen if ".quality-top" in s["headers"]["x-request-id"]]
    assert len(reasks) == 1 and reasks[0]["body"]["stream"] is False  # a whole (non-streamed) call
    assert reasks[0]["headers"]["x-tiergate-priority"] == "batch" and reasks[0]["body"]["max_tokens"] == 4


async def test_full_queue_drops_samples_without_slowing_clients(fakes, gateway, redis_prefix, http):
    (small, small_url), (top, top_url) = await fakes(2)
    top.delay_s = 1.0  # re-asks are slow: the single worker and one-slot queue fill up
    gw = await gateway(two_tier_config(small_url, top_url, redis_prefix,
                                       dict(QUALITY, queue_size=1, concurrency=1)))
    loop = asyncio.get_running_loop()
    started = loop.time()
    tiers = await asyncio.gather(*(_chat(http, gw, f"Say hello {i}.") for i in range(8)))
    assert set(tiers) == {"small"} and loop.time() - started < 0.9  # nobody waited for a re-ask
    counts = gw.state.quality.counts
    assert counts["sampled"] <= 2 and counts["dropped"] == 8 - counts["sampled"]


async def _all_routed(http, gw, tier: str) -> bool:
    return set(await _routes(http, gw)) == {tier}


async def _cap_gone(gw) -> bool:
    return gw.state.services.config.tier("small").max_tokens_cap is None


async def _sampled(http, gw, n: int):
    q = await _quality(http, gw)
    return q if q["tiers"]["small"]["recent"]["samples"] >= n else None


async def test_answers_are_judged_against_the_best_tier_the_tenant_may_use(fakes, gateway, redis_prefix, http):
    """A tenant without the top tier: its small tier's answers are re-asked of the middle tier, the
    best it may use, so every verdict is a pair of tiers it has; the top tier is never asked."""
    (small, small_url), (mid, mid_url), (top, top_url) = await fakes(3)
    doc = two_tier_config(small_url, top_url, redis_prefix, {"sampling_rate": 1.0, "refresh_s": 0.2,
                                                             "learn_across_tenants": True})
    doc["tiers"].insert(1, {"name": "mid", "level": 2, "model": "m-mid", "price_per_mtok": {"input": 1, "output": 2},
                            "workers": [{"url": mid_url}]})
    doc["tenants"] = {"narrow": {"allowed_tiers": ["small", "mid"]}}
    doc["policy"] = {"anonymous_tenant": "narrow"}
    gw = await gateway(doc)
    for content in EASY[:3]:
        assert await _chat(http, gw, content) == "small"

    learner = gw.state.quality.learner  # a verdict becomes an outcome last, after its re-ask and its count
    await wait_for(lambda: learner.counts["outcomes"] >= 3, what="three verdicts learned from")
    assert mid.served >= 3 and top.served == 0


async def test_one_tenants_failing_answers_move_only_its_own_routing(fakes, gateway, redis_prefix, http):
    """Issue 56, finding 5: a tenant whose answers fail on the small tier (it asks 4 tokens of a tier
    capped at 1) at ten times another's volume is moved up; the other tenant, whose answers pass,
    keeps its routing."""
    from policies.keys import hash_key

    (_, small_url), (_, top_url) = await fakes(2)
    keys = {"noisy": "sk-noisy-monitor-key", "quiet": "sk-quiet-monitor-key", "admin": "sk-admin-monitor-key"}
    doc = two_tier_config(small_url, top_url, redis_prefix, QUALITY, small_cap=1)
    doc["tenants"] = {name: {"keys": [{"id": "k", "sha256": hash_key(keys[name])}]} for name in ("noisy", "quiet")}
    doc["policy"] = {"admin_key_sha256": hash_key(keys["admin"])}
    gw = await gateway(doc)

    async def post(path: str, tenant: str, content: str, max_tokens: int = 1) -> dict:
        body = {"model": "auto", "max_tokens": max_tokens, "messages": [{"role": "user", "content": content}]}
        async with http.post(gw.url + path, json=body, headers={"Authorization": f"Bearer {keys[tenant]}"}) as r:
            assert r.status == 200, await r.text()
            return {"tier": r.headers["x-tiergate-tier"], **(await r.json(content_type=None))}

    for i in range(len(EASY) * 2):
        await post("/v1/chat/completions", "noisy", EASY[i % len(EASY)], max_tokens=4)
        if i % 10 == 0:
            await post("/v1/chat/completions", "quiet", EASY[i % len(EASY)])

    async def noisy_routed_up():
        return all([(await post("/v1/route", "noisy", c))["tier"] == "top" for c in EASY])
    await wait_for(noisy_routed_up)  # every replica re-reads the shared steps each refresh_s
    assert [(await post("/v1/route", "quiet", c))["tier"] for c in EASY] == ["small"] * len(EASY)
    async with http.get(gw.url + "/v1/quality", headers={"Authorization": f"Bearer {keys['admin']}"}) as r:
        q = await r.json()
    assert q["tiers"]["small"]["adjustment_steps_by_tenant"] == {"noisy": 1}
    monitor = gw.state.quality
    assert monitor.counts["failed"] >= 5 and monitor.learner.counts["outcomes"] == 0  # nor the shared models
