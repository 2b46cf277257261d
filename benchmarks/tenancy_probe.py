"""Probing another tenant's system prompt (issue 56): can tenant beta tell a prefix tenant alpha
sent from one nobody sent, through /v1/route, the answer's headers or the time to first token?

Route and headers: an in-process gateway in front of two fake workers. Alpha sends 50 system
prompts; beta then asks /v1/route and sends a chat for each of them and for 50 nobody sent. A
signal is any difference between the two sets: the share of each affinity answer, and the share
of answers from the worker alpha's prompt went to (`x-tiergate-backend`).

TTFT: a real worker (smollm2-135m, one thread) behind the gateway. 100 system prompts of about
250 tokens are split at random into seen and unseen; alpha sends the seen ones; beta streams one
token for each of the 100, seen and unseen in pairs whose order alternates, each prompt once (a
second probe would hit beta's own cache). The signal is the difference of the median TTFTs, seen
less unseen; the noise is the 95th percentile of that difference's size when the 100 probes are
relabelled at random (1,000 times), and `p_value` the share of relabellings at least as far
apart as the signal. Both with `affinity.scope: tenant` (the default) and `global`, to show the
channel the salt closes. `python -m benchmarks.tenancy_probe` prints one JSON line.
"""
from __future__ import annotations

import asyncio
import json
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp

from benchmarks.tenant_gateway import auth, tenant_gateway, tier
from launcher.fake_upstream import start_fake
from launcher.processes import free_port, stop_processes
from launcher.workers import worker_command, worker_env

PROBES = 50
MODEL = "smollm2-135m"
_HOUSE_STYLE = ("Answer in plain sentences, keep the customer's own words where they are precise, never promise "
                "dates the release calendar does not show, and escalate anything about invoices to the billing "
                "desk with the ticket number in the first line. ")


def system_prompt(run: str, i: int, chars: int) -> str:
    """A distinct prefix from its first characters on (so from the first cached block)."""
    head = f"[{run}-{i:03d}] You are the internal assistant of project {run}-{i * 7919 % 1000:03d}. "
    return (head + _HOUSE_STYLE * (chars // len(_HOUSE_STYLE) + 1))[:chars]


def _chat(system: str, max_tokens: int = 1, stream: bool = False) -> dict:
    return {"model": "t", "max_tokens": max_tokens, "stream": stream, "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Hi."}]}


async def _send(session, url: str, tenant: str, body: dict) -> dict[str, str]:
    async with session.post(url + "/v1/chat/completions", json=body, headers=auth(tenant)) as r:
        await r.read()
        if r.status != 200:
            raise RuntimeError(f"{tenant}: HTTP {r.status}")
        return dict(r.headers)


def _shares(values: list[str]) -> dict[str, float]:
    return {v: round(values.count(v) / len(values), 3) for v in sorted(set(values))}


async def _route_and_headers(workdir: Path, scope: str) -> dict:
    fakes = [await start_fake(name=f"w{i}") for i in range(2)]
    urls = [url for _, _, url in fakes]
    run = uuid.uuid4().hex[:6]
    try:
        async with tenant_gateway(workdir, [tier("t", 1, urls)], affinity={"scope": scope}) as (url, state):
            async with aiohttp.ClientSession() as session:
                alpha_worker = []
                for i in range(PROBES):
                    alpha_worker.append((await _send(session, url, "alpha", _chat(system_prompt(run, i, 600))))[
                        "x-tiergate-backend"])
                await state.services.upstreams.affinity.drain()
                found: dict[str, list[str]] = {"seen": [], "unseen": []}
                same_worker: dict[str, list[str]] = {"seen": [], "unseen": []}
                for i in range(PROBES):
                    for kind, n in (("seen", i), ("unseen", PROBES + i)):
                        body = _chat(system_prompt(run, n, 600))
                        async with session.post(url + "/v1/route", json=body, headers=auth("beta")) as r:
                            found[kind].append(str((await r.json())["affinity"]))
                        served = (await _send(session, url, "beta", body))["x-tiergate-backend"]
                        same_worker[kind].append(str(served == alpha_worker[i]))
    finally:
        for _, runner, _ in fakes:
            await runner.cleanup()
    seen_same, unseen_same = (_shares(same_worker[k]).get("True", 0.0) for k in ("seen", "unseen"))
    return {"route_affinity_seen": _shares(found["seen"]), "route_affinity_unseen": _shares(found["unseen"]),
            "same_worker_as_alpha_seen": seen_same, "same_worker_as_alpha_unseen": unseen_same,
            "header_signal_points": round(abs(seen_same - unseen_same) * 100, 1)}


async def _ttft(session, url: str, system: str) -> float:
    started = time.perf_counter()
    async with session.post(url + "/v1/chat/completions", json=_chat(system, stream=True), headers=auth("beta")) as r:
        if r.status != 200:
            raise RuntimeError(f"beta: HTTP {r.status}")
        async for line in r.content:
            if line.startswith(b"data: {") and b'"content"' in line:
                return (time.perf_counter() - started) * 1000
    raise RuntimeError("the stream carried no content")


def _null(seen: list[float], unseen: list[float], signal: float) -> tuple[float, float]:
    """(95th percentile of |median difference| under random relabelling, share at least |signal|)."""
    pooled, rng = seen + unseen, random.Random(56)
    sizes = []
    for _ in range(1000):
        rng.shuffle(pooled)
        sizes.append(abs(statistics.median(pooled[:len(seen)]) - statistics.median(pooled[len(seen):])))
    sizes.sort()
    return sizes[949], sum(size >= abs(signal) for size in sizes) / len(sizes)


async def _ttft_run(workdir: Path, worker_url: str, scope: str) -> dict:
    run = uuid.uuid4().hex[:6]
    order = list(range(2 * PROBES))
    random.Random(run).shuffle(order)  # which prompts alpha sends: any drift in their length falls on both sets
    pairs = list(zip(order[:PROBES], order[PROBES:]))
    async with tenant_gateway(workdir, [tier("t", 1, [worker_url], model=MODEL)], affinity={"scope": scope}) as (url, _):
        async with aiohttp.ClientSession() as session:
            for n, _ in pairs:
                await _send(session, url, "alpha", _chat(system_prompt(run, n, 1000)))
            seen, unseen = [], []
            for i, (s, u) in enumerate(pairs):  # in pairs: the machine's load drifts on both sets alike
                for kind, n in ((("seen", s), ("unseen", u)) if i % 2 == 0 else (("unseen", u), ("seen", s))):
                    (seen if kind == "seen" else unseen).append(await _ttft(session, url, system_prompt(run, n, 1000)))
    median = statistics.median
    signal = median(seen) - median(unseen)
    noise, p_value = _null(seen, unseen, signal)
    return {"probes": PROBES, "ttft_ms_median_seen": round(median(seen), 2), "ttft_ms_median_unseen": round(median(unseen), 2),
            "signal_ms": round(signal, 2), "noise_ms": round(noise, 2), "p_value": round(p_value, 3)}


def _start_worker() -> tuple[object, str]:
    import subprocess
    import urllib.request

    port = free_port()
    proc = subprocess.Popen(worker_command(MODEL, port, "--threads", "1"), env=worker_env(None),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the worker exited during start-up")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.5)
    stop_processes([proc])
    raise RuntimeError("the worker did not answer /health within 300 s")


async def _run(workdir: Path, with_worker: bool) -> dict:
    out = {scope: await _route_and_headers(workdir, scope) for scope in ("tenant", "global")}
    if with_worker:
        proc, worker_url = _start_worker()
        try:
            for scope in ("tenant", "global"):
                out[scope]["ttft_real_worker"] = await _ttft_run(workdir, worker_url, scope)
        finally:
            stop_processes([proc])
    return out


def measure(with_worker: bool = True) -> dict:
    with tempfile.TemporaryDirectory(prefix="tiergate-probe-") as workdir:
        return asyncio.run(_run(Path(workdir), with_worker))


if __name__ == "__main__":
    print(json.dumps(measure()))
