"""One tenant moving another's routing through the quality monitor (issue 56): tenant alpha sends
only prompts whose answers fail on the small tier, at ten times tenant beta's volume; how many
points does beta's tier mix move on replay?

An in-process gateway with the packaged classifier, the real monitor (MiniLM scorer, outcome
learning on) and fake workers: tiers small (level 1, capped at one token) and top (level 4).
Alpha asks four tokens of questions no tier can answer from what it is given: wherever the small
tier answers, its answer is cut and fails against the top tier's. Beta asks one token, which both
tiers answer alike. Beta's 50 prompts are routed (/v1/route) before and after; the mix is each
tier's share in points. Alpha's own prompts, routed the same way, show the monitor did act.
Run as configured by default, and with `quality.learn_across_tenants: true` (every tenant's
verdicts train the shared outcome models), where beta's move is counted against a run in which
beta sends alone (what its own verdicts teach is not alpha's doing).
`python -m benchmarks.tenancy_quality` prints one JSON line.
"""
from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

import aiohttp

from benchmarks.chat_prompts import CHAT_PROMPTS
from benchmarks.tenant_gateway import auth, tenant_gateway, tier
from launcher.fake_upstream import start_fake

VOLUME_RATIO = 10
_ABOUT_ME = ["What is my cat's name?", "Which shirt did I wear yesterday?", "What number am I thinking of?",
             "What did I eat for lunch on day {n}?", "Guess my middle name.", "What is my neighbour's dog called?",
             "Which song is stuck in my head right now?"]


def unanswerable(i: int) -> str:
    """A short question only the asker could answer: no tier does well, and it looks easy (level 1)."""
    question = _ABOUT_ME[i % len(_ABOUT_ME)].format(n=i // len(_ABOUT_ME) + 1)
    return question if i < len(_ABOUT_ME) else f"{question} (question {i})"


def _mix(tiers: list[str]) -> dict[str, float]:
    return {t: round(100 * tiers.count(t) / len(tiers), 1) for t in ("small", "top")}


async def _routes(session, url: str, tenant: str, prompts: list[str]) -> list[str]:
    out = []
    for content in prompts:
        body = {"model": "auto", "max_tokens": 1, "messages": [{"role": "user", "content": content}]}
        async with session.post(url + "/v1/route", json=body, headers=auth(tenant)) as r:
            out.append((await r.json())["tier"])
    return out


async def _chat(session, url: str, tenant: str, content: str, max_tokens: int) -> None:
    body = {"model": "auto", "max_tokens": max_tokens, "messages": [{"role": "user", "content": content}]}
    async with session.post(url + "/v1/chat/completions", json=body, headers=auth(tenant)) as r:
        await r.read()


async def _drained(monitor, deadline_s: float = 300) -> None:
    """Every queued sample judged (the monitor works in the background)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        c = monitor.counts
        if monitor.queue.qsize() == 0 and c["sampled"] == c["passed"] + c["failed"] + c["error"]:
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"the monitor did not drain: {monitor.counts}")


async def _scenario(workdir: Path, learn_across_tenants: bool, flood: bool) -> dict:
    from classifier.runtime import ComplexityClassifier

    step = ComplexityClassifier.load().thresholds[2]  # one step moves every request off tier 1
    fakes = [await start_fake(name=name) for name in ("small", "top")]
    (_, _, small_url), (_, _, top_url) = fakes
    quality = {"sampling_rate": 1.0, "window": 20, "min_samples": 10, "trigger": 0.3, "recover": 0.15,
               "step": step, "max_steps": 1, "refresh_s": 0.2, "queue_size": 4096,
               "learn_across_tenants": learn_across_tenants}
    tiers = [tier("small", 1, [small_url], max_tokens_cap=1), tier("top", 4, [top_url])]
    alpha_prompts = [unanswerable(i) for i in range(len(CHAT_PROMPTS) * VOLUME_RATIO)]
    started = time.perf_counter()
    try:
        async with tenant_gateway(workdir, tiers, quality=quality) as (url, state):
            async with aiohttp.ClientSession() as session:
                beta_before = await _routes(session, url, "beta", CHAT_PROMPTS)
                alpha_before = await _routes(session, url, "alpha", alpha_prompts[:50])
                for i, content in enumerate(alpha_prompts):
                    if flood:
                        await _chat(session, url, "alpha", content, max_tokens=4)
                    if i % VOLUME_RATIO == 0:
                        await _chat(session, url, "beta", CHAT_PROMPTS[i // VOLUME_RATIO], max_tokens=1)
                await _drained(state.quality)
                await asyncio.sleep(3 * quality["refresh_s"])  # every refresh has read the steps
                beta_after = await _routes(session, url, "beta", CHAT_PROMPTS)
                alpha_after = await _routes(session, url, "alpha", alpha_prompts[:50])
                monitor = state.quality
                counts, learned = dict(monitor.counts), dict(monitor.learner.counts)
                steps = {tenant: dict(by_tier) for tenant, by_tier in monitor.controller.steps.items()}
    finally:
        for _, runner, _ in fakes:
            await runner.cleanup()
    before, after = _mix(beta_before), _mix(beta_after)
    return {"beta_requests": len(CHAT_PROMPTS), "alpha_requests": len(alpha_prompts) if flood else 0,
            "beta_mix_before": before, "beta_mix_after": after,
            "beta_moved_points": _moved(before, after),
            "alpha_mix_before": _mix(alpha_before), "alpha_mix_after": _mix(alpha_after),
            "adjustment_steps": steps, "samples": counts, "learning": learned,
            "seconds": round(time.perf_counter() - started, 1)}


def measure() -> dict:
    with tempfile.TemporaryDirectory(prefix="tiergate-quality-") as workdir:
        return asyncio.run(_run(Path(workdir)))


def _moved(before: dict[str, float], after: dict[str, float]) -> float:
    return round(max(abs(after[t] - before[t]) for t in before), 1)


async def _run(workdir: Path) -> dict:
    default = await _scenario(workdir, learn_across_tenants=False, flood=True)
    pooled = await _scenario(workdir, learn_across_tenants=True, flood=True)
    alone = await _scenario(workdir, learn_across_tenants=True, flood=False)
    return {"default": default, "learn_across_tenants": {
        **pooled, "beta_alone_mix_after": alone["beta_mix_after"],
        "beta_moved_points_by_alpha": _moved(alone["beta_mix_after"], pooled["beta_mix_after"])},
        "beta_moved_points": default["beta_moved_points"]}


if __name__ == "__main__":
    print(json.dumps(measure()))
