"""Must show 2: feedback exported from Redis, the classifier retrained, hot-swapped into a running
gateway without dropping requests, and the failing kind of request routed differently.

The gateway (in-process, real ONNX classifier, real MiniLM scorer, shared Redis) serves a
small tier capped at one token, so "Which continent is X in?" questions, which the packaged
model sends to the small tier, fail their samples. The controller is kept out of the way
(trigger 1.0 can never be exceeded) so only the retrained model can change routing.
Training uses 1/4 of the packaged training split and 1/2 of the validation split plus the
feedback rows, so it trains in about half the time the full data takes.
"""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from classifier.runtime import METADATA_FILE, MODEL_FILE, PACKAGED_MODEL_DIR
from tests.gateway.quality.quality_helpers import two_tier_config
from tests.support import wait_for

pytestmark = pytest.mark.live  # runs `python -m classifier` to export, train and swap

ROOT = Path(__file__).parents[3]
SEEN = ["Chile", "Kenya", "Norway", "Peru", "Egypt", "Japan", "Canada", "Brazil", "Spain", "India", "Ghana",
        "Nepal", "Cuba", "Fiji", "Laos", "Mali", "Oman", "Qatar", "Italy", "Sudan"]
UNSEEN = ["Mongolia", "Bolivia", "Angola", "Sweden", "Vietnam", "Austria"]
CONTROL = ["Say hello.", "Tell me a joke.", "Name a fruit."]


def _cli(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "classifier", *args], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=240)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _subsample(folder: Path) -> Path:
    folder.mkdir()
    for split, every in (("train", 4), ("validation", 2)):
        lines = (ROOT / "classifier" / "data" / f"{split}.jsonl").read_text().splitlines()
        (folder / f"{split}.jsonl").write_text("\n".join(lines[::every]) + "\n")
    return folder


async def _route(http, gw, content: str) -> str:
    async with http.post(gw.url + "/v1/route", json={"model": "auto", "messages": [
            {"role": "user", "content": content}]}) as r:
        return (await r.json())["tier"]


async def _chat(http, gw, content: str) -> int:
    async with http.post(gw.url + "/v1/chat/completions", json={
            "model": "auto", "max_tokens": 4, "messages": [{"role": "user", "content": content}]}) as r:
        await r.read()
        return r.status


async def test_feedback_retrain_hot_swap_changes_route(fakes, gateway, redis_prefix, http, tmp_path):
    (_, small_url), (_, top_url) = await fakes(2)
    watched = tmp_path / "model"
    watched.mkdir()
    for name in (MODEL_FILE, METADATA_FILE):
        shutil.copy(PACKAGED_MODEL_DIR / name, watched / name)
    quality = {"sampling_rate": 1.0, "store_requests": True, "trigger": 1.0, "recover": 0.5, "window": 100,
               "classifier_model_dir": str(watched), "refresh_s": 0.2}
    gw = await gateway(two_tier_config(small_url, top_url, redis_prefix, quality, small_cap=1))
    old_version = gw.state.classifiers.current.version
    unseen = [f"Which continent is {c} in?" for c in UNSEEN]
    assert [await _route(http, gw, q) for q in unseen] == ["small"] * len(UNSEEN)

    assert {await _chat(http, gw, f"Which continent is {c} in?") for c in SEEN} == {200}
    await wait_for(lambda: _scored(gw, len(SEEN)), timeout_s=30)

    feedback = tmp_path / "feedback.jsonl"
    exported = await asyncio.to_thread(_cli, "export-feedback", "--redis-url", gw.state.services.config.redis.url,
                                       "--prefix", redis_prefix, "--out", str(feedback))
    assert exported["failed"] == len(SEEN) and exported["label_distribution"]["2"] == len(SEEN)
    rows = [json.loads(line) for line in feedback.read_text().splitlines()]
    assert rows[0]["messages"][0]["content"].startswith("Which continent is") and rows[0]["tier"] == 2

    trained = tmp_path / "trained"
    await asyncio.to_thread(_cli, "train", "--data", str(_subsample(tmp_path / "data")),
                            "--feedback", str(feedback), "--out", str(trained))

    # swap under load: requests keep flowing while the new files land in the watched folder
    stop, statuses = asyncio.Event(), []

    async def traffic() -> None:
        while not stop.is_set():
            statuses.append(await _chat(http, gw, "Say hello."))

    load = asyncio.create_task(traffic())
    for name in (MODEL_FILE, METADATA_FILE):
        shutil.copy(trained / name, watched / name)
    await wait_for(lambda: _version_changed(gw, old_version), timeout_s=15)
    swapped_at = len(statuses)
    await wait_for(lambda: len(statuses) >= swapped_at + 3, timeout_s=15)  # served by the new model too
    stop.set()
    await load
    assert statuses and set(statuses) == {200}

    new_version = json.loads((trained / METADATA_FILE).read_text())["version"]
    async with http.get(gw.url + "/v1/quality") as r:
        swap = (await r.json())["classifier"]
    assert swap["version"] == new_version and swap["swaps"][-1]["previous"] == old_version
    assert [await _route(http, gw, q) for q in unseen] == ["top"] * len(UNSEEN)  # the failing kind moved up
    assert [await _route(http, gw, q) for q in CONTROL] == ["small"] * len(CONTROL)  # others did not

    async with http.post(gw.url + "/admin/classifier/reload") as r:  # the endpoint reloads the same folder
        assert r.status == 200 and (await r.json())["current"] == new_version


async def _scored(gw, n: int) -> bool:
    counts = gw.state.quality.counts
    return counts["failed"] + counts["passed"] >= n


async def _version_changed(gw, old: str) -> bool:
    return gw.state.classifiers.current.version != old
