"""Must show 1: real inference workers (smollm2-135m), the real gateway process, the openai SDK.

The small tier is made worse on purpose: its config caps max_tokens at 1, so its answers are
cut short. With every answer sampled, the monitor must notice within 200 samples and move
traffic up; after the fault is removed (config hot reload) the adjustment must return to 0
and the same requests route to the small tier again. Both tiers share one worker (one model
load, two cores); greedy decoding makes the healthy small tier answer like the top tier.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import yaml
import json
import urllib.request

from tests.gateway.e2e_stack import e2e_stack, tier
from tests.gateway.quality.quality_helpers import EASY, step_to_leave_tier_1
from tests.support.kinds import starts_processes

QUALITY = {"sampling_rate": 1.0, "window": 20, "min_samples": 10, "trigger": 0.3, "recover": 0.15,
           "step": step_to_leave_tier_1(), "max_steps": 1, "refresh_s": 0.25, "concurrency": 4}
MAX_SAMPLES = 200


def _tiers(urls: list[str], small_cap: int | None) -> list[dict]:
    small = tier("small", 1, urls)
    if small_cap is not None:
        small["max_tokens_cap"] = small_cap
    return [small, tier("large", 3, urls)]


@pytest.fixture(scope="module")
@starts_processes
def stack(tmp_path_factory, shared_worker):
    with e2e_stack(tmp_path_factory.mktemp("quality-e2e"), lambda urls: _tiers(urls, 1), n_workers=0,
                   running_workers=(shared_worker,), quality=QUALITY,
                   redis={"socket_timeout_s": 5}) as s:  # /v1/quality reads Redis: slow replies on a loaded machine are no 503
        yield s


def _ask(client, i: int) -> str:
    raw = client.chat.completions.with_raw_response.create(
        model="auto", max_tokens=8, temperature=0,
        messages=[{"role": "user", "content": EASY[i % len(EASY)]}])
    assert raw.parse().choices[0].message.content is not None
    return raw.headers["x-tiergate-tier"]


def _http(url: str, body: dict | None = None) -> bytes:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


def _quality(stack) -> dict:
    return json.loads(_http(stack.url + "/v1/quality"))


def _routes(stack) -> list[str]:
    return [json.loads(_http(stack.url + "/v1/route", {"model": "auto", "messages": [
        {"role": "user", "content": c}]}))["tier"] for c in EASY]


def _drive_until(stack, client, done, budget: int) -> dict:
    """Send requests (4 at a time) until done(quality summary) or `budget` samples were taken."""
    with ThreadPoolExecutor(4) as pool:
        sent = 0
        while True:
            q = _quality(stack)
            if done(q):
                return q
            samples = q["local_counts"]["passed"] + q["local_counts"]["failed"]
            assert samples <= budget, f"no decision after {samples} samples: {q['tiers']}"
            if q["queue_depth"] < 4:
                list(pool.map(lambda i: _ask(client, i), range(sent, sent + 4)))
                sent += 4
            else:
                time.sleep(0.2)


def test_degraded_tier_detected_shifted_and_restored(stack):
    with openai.OpenAI(base_url=stack.url + "/v1", api_key="local", max_retries=0, timeout=120) as client:
        assert set(_routes(stack)) == {"small"}
        started = time.monotonic()
        q = _drive_until(stack, client, lambda q: q["tiers"]["small"]["adjustment_steps"] >= 1, MAX_SAMPLES)
        detected_after = q["local_counts"]["passed"] + q["local_counts"]["failed"]
        detected_s = time.monotonic() - started
        assert detected_after <= MAX_SAMPLES and q["tiers"]["small"]["recent"]["failed"] >= 8
        assert q["changes"][0]["tier"] == "small" and "above the trigger" in q["changes"][0]["reason"]
        assert set(_routes(stack)) == {"large"}  # traffic shifted up
        assert {_ask(client, i) for i in range(4)} == {"large"}

        # remove the fault: hot-reload the config without the small tier's cap
        path, = stack.configs
        doc = yaml.safe_load(path.read_text())
        doc["tiers"][0].pop("max_tokens_cap")
        path.write_text(yaml.safe_dump(doc))
        q = _drive_until(stack, client, lambda q: q["tiers"]["small"]["adjustment_steps"] == 0, 2 * MAX_SAMPLES)
        assert "below the recover level" in q["changes"][0]["reason"]
        assert set(_routes(stack)) == {"small"}  # thresholds returned
        metrics = _http(stack.url + "/metrics").decode()
        assert 'tiergate_quality_adjustment_steps{tier="small"} 0.0' in metrics
        assert 'tiergate_quality_threshold_changes_total{direction="relax",tier="small"}' in metrics
        print(f"detected after {detected_after} samples ({detected_s:.1f}s); "
              f"whole cycle {time.monotonic() - started:.1f}s")

