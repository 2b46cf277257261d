"""The latency the cascade adds (issue 54): `python -m benchmarks.cascade_latency [--rounds 100]`.

An in-process gateway (the real app; no tenants, so the policy defaults' `routing.cascade`
applies: mode allow, a stream holds its first 8 tokens) in front of two fake upstreams on
loopback (launcher/fake_upstream.py, paced: one token per chunk delay, 32 tokens an answer):
small (level 1, 2 ms a token) and large (level 2, 4 ms a token). Each round sends the same
request, whole and streamed, three ways in turn: `cascade: false`; cascaded with small's tokens
sure (kept); cascaded with small's tokens unsure (escalated to large). Whole answers are timed
end to end, streams to their first content chunk. The added latency of a round is the cascaded
request's time less the uncascaded one's; p50 and p99 over the rounds. The last line is one
JSON object."""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import yaml

TOKENS, HOLD = 32, 8
SURE, UNSURE = -0.01, -5.0
WAYS = {"uncascaded": (False, SURE), "kept": (True, SURE), "escalated": (True, UNSURE)}


async def _gateway(small_url: str, large_url: str, folder: Path):
    from gateway.app import build_app, start_site
    from gateway.config import load_config
    from gateway.core.classify import PromptLengthClassifier
    from gateway.state import GatewayState
    from launcher.processes import SHARED_REDIS

    tiers = [{"name": name, "level": level, "model": f"model-{name}", "workers": [{"url": url}],
              "price_per_mtok": {"input": level * 1.0, "output": level * 2.0}}
             for level, (name, url) in enumerate((("small", small_url), ("large", large_url)), start=1)]
    doc = {"tiers": tiers, "redis": {"url": SHARED_REDIS, "key_prefix": f"bench-cascade-{uuid.uuid4().hex[:8]}"},
           "policy": {"defaults": {"routing": {"cascade": {"mode": "allow", "hold_tokens": HOLD,
                                                           "hold_whole_max_tokens": HOLD - 1}}}}}
    path = folder / "tiergate.yaml"
    path.write_text(yaml.safe_dump(doc))
    state = GatewayState(load_config(path), str(path), classifier=PromptLengthClassifier())
    runner = await start_site(build_app(state), "127.0.0.1", 0)
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def _timed(http: aiohttp.ClientSession, url: str, cascade: bool, stream: bool) -> tuple[float, str]:
    """Seconds to the whole answer (or a stream's first content chunk), and the cascade header."""
    body = {"model": "auto", "messages": [{"role": "user", "content": "say something"}], "max_tokens": TOKENS,
            "cascade": cascade, "stream": stream}
    started = time.perf_counter()
    async with http.post(url + "/v1/chat/completions", json=body) as answer:
        if answer.status != 200:
            raise RuntimeError(f"HTTP {answer.status}: {await answer.text()}")
        took = None
        async for line in answer.content:
            if took is None and stream and line.startswith(b"data: {") and b'"content"' in line:
                took = time.perf_counter() - started
        return (took if stream else time.perf_counter() - started), answer.headers.get("x-tiergate-cascade", "")


def _added(cascaded: list[float], plain: list[float]) -> dict:
    added = sorted((c - p) * 1000.0 for c, p in zip(cascaded, plain))
    return {"p50_ms": round(statistics.median(added), 2),
            "p99_ms": round(added[min(len(added) - 1, int(0.99 * len(added)))], 2)}


async def run(rounds: int) -> dict:
    from launcher.fake_upstream import start_fake

    small, small_runner, small_url = await start_fake(name="small", chunks=TOKENS, chunk_delay_s=0.002)
    large, large_runner, large_url = await start_fake(name="large", chunks=TOKENS, chunk_delay_s=0.004)
    small.paced = large.paced = True
    with tempfile.TemporaryDirectory() as folder:
        runner, url = await _gateway(small_url, large_url, Path(folder))
        times = {(way, stream): [] for way in WAYS for stream in (False, True)}
        try:
            async with aiohttp.ClientSession() as http:
                for _ in range(3):  # warm up: connections, the worker cards
                    await _timed(http, url, False, False)
                for _ in range(rounds):
                    for stream in (False, True):
                        for way, (cascade, logprob) in WAYS.items():
                            small.logprob = logprob
                            took, said = await _timed(http, url, cascade, stream)
                            if cascade and not said.startswith("kept" if way == "kept" else "escalated"):
                                raise RuntimeError(f"{way}: the gateway said {said!r}")
                            times[(way, stream)].append(took)
        finally:
            await runner.cleanup()
            await small_runner.cleanup()
            await large_runner.cleanup()
    result = {"rounds": rounds, "tokens": TOKENS, "hold_tokens": HOLD, "ms_per_token": {"small": 2, "large": 4}}
    for stream, what in ((False, "whole_e2e"), (True, "stream_ttft")):
        plain = times[("uncascaded", stream)]
        result[what] = {"uncascaded_p50_ms": round(statistics.median(plain) * 1000.0, 2),
                        **{f"added_{way}": _added(times[(way, stream)], plain) for way in ("kept", "escalated")}}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.rounds))))


if __name__ == "__main__":
    main()
