"""A real worker killed while requests are in flight: no client sees anything but a valid
answer or an OpenAI error; non-streamed requests that had no bytes yet finish on the other worker."""
from __future__ import annotations

import json
import re
import signal
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from e2e_stack import Stack, tier


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = Stack(tmp_path_factory.mktemp("e2e-failover"), lambda urls: [tier("small", 1, urls)],
              affinity={"enabled": False})
    yield s
    s.close()


def _whole(client, i):
    raw = client.chat.completions.with_raw_response.create(
        model="small", max_tokens=64, temperature=0, extra_body={"ignore_eos": True},
        messages=[{"role": "user", "content": f"Write a long story number {i}."}])
    return raw.headers["x-tiergate-backend"], raw.parse()


def _streamed(client, i):
    try:
        stream = client.chat.completions.create(
            model="small", max_tokens=64, stream=True, extra_body={"ignore_eos": True},
            messages=[{"role": "user", "content": f"Tell me a story {i}."}])
        return "ok", "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    except openai.APIError as exc:  # an OpenAI-style error (event) is an acceptable outcome
        return "error", str(exc)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def _wait_in_flight(stack, index: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if json.loads(_get(stack.url + "/health"))["backends"][stack.worker_urls[index]]["outstanding"] >= 2:
            return
        time.sleep(0.02)
    raise AssertionError("no requests ever in flight on the worker to kill")


def _retries(stack) -> float:
    return sum(float(v) for v in re.findall(r"^tiergate_retries_total\{[^}]*\} (\S+)$", _get(stack.url + "/metrics"),
                                            re.M))


def test_worker_killed_mid_flight(stack):
    with openai.OpenAI(base_url=stack.url + "/v1", api_key="x", max_retries=0, timeout=120) as client:
        with ThreadPoolExecutor(10) as pool:
            whole = [pool.submit(_whole, client, i) for i in range(6)]
            streams = [pool.submit(_streamed, client, i) for i in range(4)]
            _wait_in_flight(stack, 0)
            stack.workers[0].send_signal(signal.SIGKILL)
            answers = [f.result() for f in whole]
            streamed = [f.result() for f in streams]
    for backend, answer in answers:
        assert answer.choices[0].message.content and answer.usage.completion_tokens > 0
    assert _retries(stack) >= 1  # some request in flight on the dead worker finished on the live one
    assert all(kind in ("ok", "error") for kind, _ in streamed)
    with openai.OpenAI(base_url=stack.url + "/v1", api_key="x", max_retries=0, timeout=60) as client:
        for i in range(3):  # afterwards, traffic keeps flowing to the survivor
            backend, answer = _whole(client, 100 + i)
            assert backend == stack.label(1)
