"""Routing learns from the monitor's verdicts, and the guard refuses a candidate that routes worse.

A real gateway (in-process) with the real ONNX classifier, the real MiniLM scorer and the shared
Redis, in front of two fake tiers: the small one answers every question about sales tax wrongly.
"""
from __future__ import annotations

import json

import pytest

from gateway.core.classify import ClassifierSlot, load_classifier
from gateway.quality.learning import OutcomeLearner
from tests.gateway.quality.quality_helpers import EASY, two_tier_config
from tests.support import wait_for
from tests.support.metrics import metric

STATES = ["Ohio", "Texas", "Utah", "Maine", "Iowa", "Idaho", "Oregon", "Nevada", "Kansas", "Alaska", "Georgia",
          "Vermont", "Florida", "Montana", "Arizona", "Indiana", "Alabama", "Wyoming", "Kentucky", "Colorado",
          "Delaware", "Michigan", "Missouri", "Nebraska"]
KIND = [f"What is the sales tax in {state}?" for state in STATES]
PROBE_KIND = ["What is the sales tax in Virginia?", "What is the sales tax in Oklahoma?"]
PROBE_OTHER = ["Say goodbye.", "Name a colour."]
LEARN_EVERY = 24
QUALITY = {"sampling_rate": 1.0, "concurrency": 1, "window": 50, "trigger": 0.99, "recover": 0.5, "refresh_s": 0.2,
           "learn_every": LEARN_EVERY, "heldout_share": 0.25, "min_heldout": 2}


async def _chat(http, gw, content: str) -> str:
    body = {"model": "auto", "max_tokens": 4, "messages": [{"role": "user", "content": content}]}
    async with http.post(gw.url + "/v1/chat/completions", json=body) as r:
        assert r.status == 200, await r.text()
        await r.read()
        return r.headers["x-tiergate-tier"]


async def _route(http, gw, content: str) -> dict:
    async with http.post(gw.url + "/v1/route", json={"model": "auto", "messages": [
            {"role": "user", "content": content}]}) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def _tiers(http, gw, contents) -> list[str]:
    return [(await _route(http, gw, c))["tier"] for c in contents]


async def _router(http, gw) -> dict:
    async with http.get(gw.url + "/v1/quality") as r:
        assert r.status == 200, await r.text()
        return (await r.json())["router"]


async def test_a_kind_failing_on_the_small_tier_is_sent_up_and_a_worse_candidate_refused(fakes, gateway, redis_prefix,
                                                                                         http):
    (small, small_url), (_, top_url) = await fakes(2)
    small.replies = {"sales tax": "I am not sure about that."}
    gw = await gateway(two_tier_config(small_url, top_url, redis_prefix, QUALITY))
    before = await _route(http, gw, PROBE_KIND[0])
    assert before["tier"] == "small" and before["p_good"]["1"] > 0.5 and before["classifier"]["evidence"]["1"] == 0
    assert await _tiers(http, gw, PROBE_OTHER) == ["small"] * len(PROBE_OTHER)

    sent = [c for pair in zip(KIND, EASY * 3) for c in pair] + KIND[len(EASY) * 3:]
    for content in sent:
        assert await _chat(http, gw, content) in ("small", "top")  # a swap mid-way sends sales tax up

    async def learned():
        router = await _router(http, gw)
        return router if router["swapped"] >= 1 else None
    router = await wait_for(learned, what="a candidate swapped in")
    assert router["history"][-1]["result"] == "swapped" and router["heldout"] >= 2
    assert router["history"][-1]["quality_target_met"] is True  # a swap needs the guard's target check too
    after = await _route(http, gw, PROBE_KIND[0])
    assert after["p_good"]["1"] < 0.5 and after["classifier"]["evidence"]["1"] > 0
    assert await _tiers(http, gw, PROBE_KIND) == ["top"] * len(PROBE_KIND)
    assert await _tiers(http, gw, PROBE_OTHER) == ["small"] * len(PROBE_OTHER)
    # /v1/route explains the decision as the gain forgone against the threshold it met, and shows
    # nothing of the outcomes it learned from (no neighbour, no other prompt)
    kept = (await _route(http, gw, PROBE_OTHER[0]))["quality"]
    assert kept["learned_from_outcomes"] and kept["expected_gain_forgone"] <= kept["threshold"]
    assert after["quality"]["expected_gain_by_level"]["1"] > after["quality"]["expected_gain_by_level"]["4"] == 0
    assert not any(c in json.dumps(after) for c in KIND)

    # an outcome file that says the opposite of what the monitor saw: learned from, judged on the held out
    poison = [{"prompt": c, "outcomes": {"1": True}} for c in KIND] + \
             [{"prompt": c, "outcomes": {"1": False, "4": True}} for c in (EASY * 3)[:len(KIND)]]
    body = "".join(json.dumps(line) + "\n" for line in poison)
    async with http.post(gw.url + "/admin/router/outcomes?heldout_share=0", data=body) as r:
        assert r.status == 200, await r.text()
        answer = await r.json()
    assert answer["lines"] == len(poison) and answer["heldout"] == 0
    # a batch that still routes the held-out outcomes as well may serve; once it routes them worse, it may not
    refused = [d for d in answer["decisions"] if d["result"] == "refused"]
    assert refused, answer["decisions"]
    assert all(d["savings_at_95pct"]["candidate"] < d["savings_at_95pct"]["serving"]
               or d["apgr"]["candidate"] < d["apgr"]["serving"] for d in refused)
    assert await _tiers(http, gw, PROBE_KIND) == ["top"] * len(PROBE_KIND)
    assert await _tiers(http, gw, PROBE_OTHER) == ["small"] * len(PROBE_OTHER)

    # a replica started now replays the stream to the same decisions
    fresh = OutcomeLearner(ClassifierSlot(load_classifier()), lambda: gw.state.services.config)
    fresh.start(gw.state.redis, redis_prefix)
    live = gw.state.quality.learner

    def state(learner):
        return learner.counts["swapped"], learner.counts["refused"], len(learner.learned), len(learner.heldout)

    async def agree() -> bool:  # verdicts still on their way to the stream at upload time reach both in turn
        await live.poll()
        await fresh.poll()
        return state(fresh) == state(live)

    await wait_for(agree, timeout_s=15, what="the replaying replica reaching the live learner's decisions")
    assert state(fresh) == state(live) and state(fresh)[0] >= 1
    assert fresh.slot.current.classify([{"role": "user", "content": PROBE_KIND[0]}], None).p_good == \
        pytest.approx(gw.state.classifiers.current.classify([{"role": "user", "content": PROBE_KIND[0]}], None).p_good)

    async with http.post(gw.url + "/admin/router/outcomes", data='{"prompt": "hi", "outcomes": {"9": true}}') as r:
        assert r.status == 400 and "tier levels" in (await r.json())["error"]["message"]
    async with http.get(gw.url + "/metrics") as r:
        text = await r.text()
    assert metric(text, "tiergate_router_candidates_total", result="refused") >= 1
    assert metric(text, "tiergate_router_outcomes_total", source="upload") >= len(poison)
