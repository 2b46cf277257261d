"""Chaos against REAL inference workers (two smollm2 workers behind a gateway process, a tenant
whose spend is booked): clients that hang up mid-stream in bulk, and a worker SIGKILLed under
mixed load. Afterwards nothing is left behind: the gateway holds no request, every live worker's
engine is idle (no running or waiting sequence, no KV block held by a sequence; freed prefix-cache
blocks count as free in kv_cache_usage_ratio) and the Redis spend ledger equals the usage log.

What a client may see when a worker dies (gateway/core/upstream.py, gateway/core/relay.py docstrings):
- a non-streamed request is retried on the other worker before any byte reaches the client, so
  it is always a 200 with a whole answer;
- a stream that already started on the dead worker is cut: HTTP 200, then an OpenAI error event
  (code upstream_error) and [DONE] - the openai client raises APIError, not APIStatusError;
- a stream that had no bytes yet is retried like a non-streamed request;
- a 503 only as the documented overload answer, with Retry-After (none is expected here).
Never a 500/502/504, never a hang (every request has a deadline)."""
from __future__ import annotations

import json
import queue
import signal
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from measure.scale import chaos_scale
from policies.keys import hash_key
from policies.usage_log import read_records
from tests.gateway.e2e_stack import e2e_stack, tier
from tests.support import Pending, wait_until
from tests.support.metrics import metric, scrape

TENANTS = ("dropper", "killer")
DEADLINE_S = 60.0  # per request: a hung connection fails the test instead of stalling it


ADMIN_KEY = "sk-admin-chaos-key"  # /health names the workers only to it


def key(tenant: str) -> str:
    return f"sk-{tenant}-chaos-key"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("worker-chaos")
    with e2e_stack(tmp, lambda urls: [tier("small", 1, urls)], affinity={"enabled": False},
                   policy={"usage_log": {"dir": str(tmp / "usage"), "fsync": "always"},
                           "admin_key_sha256": hash_key(ADMIN_KEY)},
                   tenants={t: {"keys": [{"id": "k", "sha256": hash_key(key(t))}]} for t in TENANTS}) as s:
        yield s


def _get(url: str | urllib.request.Request) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def _name(index: int) -> str:
    """How the gateway names worker `index` to a tenant (x-tiergate-backend): its tier, its place in it."""
    return f"small-{index + 1}"


def _outstanding(stack) -> dict[str, int]:
    health = urllib.request.Request(stack.url + "/health", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    return {url: b["outstanding"] for url, b in json.loads(_get(health))["backends"].items()}


def _worker_state(url: str) -> dict[str, float]:
    page = scrape(url, timeout_s=5)  # the gauges have no default: a renamed one must not read as idle
    return {"running": metric(page, "tiergate_worker_num_requests_running"),
            "waiting": metric(page, "tiergate_worker_num_requests_waiting"),
            "kv": metric(page, "tiergate_worker_kv_cache_usage_ratio"),
            "aborts": metric(page, "tiergate_worker_requests_total", default=0.0, finish_reason="abort")}


def _live_workers(stack) -> list[str]:
    return [url for url, proc in zip(stack.worker_urls, stack.workers) if proc.poll() is None]


def _poll(check, timeout_s: float, what: str):
    """check() -> (done, detail); fails with the last detail if never done in time."""
    def done():
        ok, detail = check()
        return (detail,) if ok else Pending(detail)  # a tuple: truthy even when detail is not

    return wait_until(done, timeout_s, 0.1, what=what)[0]


def _assert_settled(stack, tenant: str, expected_records: int) -> None:
    """Nothing held by the gateway or any live worker, and ledger == usage log for the tenant."""
    _poll(lambda: (not any((o := _outstanding(stack)).values()), o), 10, "gateway outstanding back to 0")
    for url in _live_workers(stack):
        _poll(lambda: ((s := _worker_state(url))["running"] == s["waiting"] == s["kv"] == 0, s), 10,
              f"worker {url} back to idle (no sequence, no KV block held)")

    def ledger_matches_log():
        records = [r for r in read_records([str(p) for p in (stack.tmp / "usage").glob("*.jsonl")]) if r.tenant == tenant]
        request = urllib.request.Request(stack.url + "/v1/usage", headers={"Authorization": f"Bearer {key(tenant)}"})
        ledger = json.loads(_get(request))["month_spend_micro_usd"]
        logged = sum(r.cost_micro for r in records)
        return len(records) == expected_records and ledger == logged, (len(records), expected_records, ledger, logged)

    _, _, ledger, _ = _poll(ledger_matches_log, 10, "one usage record per request and ledger == log")
    assert ledger > 0


def _client(stack, tenant: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.url + "/v1", api_key=key(tenant), max_retries=0, timeout=DEADLINE_S)


def test_bulk_disconnects_mid_stream_free_the_workers(stack):
    n = 16 * chaos_scale()
    aborts_before = sum(_worker_state(u)["aborts"] for u in _live_workers(stack))

    def hang_up(client, i):
        stream = client.chat.completions.create(
            model="small", max_tokens=1500, stream=True, extra_body={"ignore_eos": True},
            messages=[{"role": "user", "content": f"Write a very long essay, part {i}."}])
        chunks = 0
        for chunk in stream:
            chunks += 1
            if chunks == 3:
                break
        stream.close()  # an unfinished response: httpx closes the connection, the gateway sees it go
        return chunks

    with _client(stack, "dropper") as client, ThreadPoolExecutor(n) as pool:
        started = time.monotonic()
        got = [f.result(timeout=DEADLINE_S) for f in [pool.submit(hang_up, client, i) for i in range(n)]]
    assert got == [3] * n
    assert time.monotonic() - started < DEADLINE_S
    # every generation was aborted in the engine (1500 tokens each would keep them busy for minutes)
    _poll(lambda: ((a := sum(_worker_state(u)["aborts"] for u in _live_workers(stack))) - aborts_before >= n, a),
          15, f"{n} aborts reached the engines")
    _assert_settled(stack, "dropper", n)  # a cut stream is billed for what was streamed


def _whole(client, i, max_tokens: int = 32):
    raw = client.chat.completions.with_raw_response.create(
        model="small", max_tokens=max_tokens, temperature=0, extra_body={"ignore_eos": True},
        messages=[{"role": "user", "content": f"Write a long story number {i}."}])
    answer = raw.parse()
    assert raw.status_code == 200 and answer.choices[0].message.content and answer.usage.completion_tokens == max_tokens
    return "whole", raw.headers["x-tiergate-backend"]


def _streamed(client, i, started: queue.Queue):
    """Puts the serving worker's name on `started` once the first chunk arrived."""
    try:
        stream = client.chat.completions.create(
            model="small", max_tokens=32, stream=True, extra_body={"ignore_eos": True},
            messages=[{"role": "user", "content": f"Tell me a story {i}."}])
        text = []
        for chunk in stream:
            if not text:
                started.put(stream.response.headers["x-tiergate-backend"])
            text.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
        return "stream", bool("".join(text))
    except openai.APIStatusError as exc:  # an HTTP error status: only the documented 503 is allowed
        assert exc.status_code == 503 and exc.response.headers.get("retry-after"), exc
        assert set(exc.body or {}) >= {"message", "type", "code"}, exc.body
        return "503", None
    except openai.APIError as exc:  # the error event of a stream cut mid-way (HTTP 200 already sent)
        assert exc.code == "upstream_error" and "mid-stream" in exc.message, exc
        return "cut", None


def _retries(stack) -> float:
    return metric(scrape(stack.url, timeout_s=5), "tiergate_retries_total", default=0.0)


def test_worker_killed_under_mixed_load(stack):
    n_whole, n_streams = 6 * chaos_scale(), 4 * chaos_scale()
    retries_before = _retries(stack)
    started: queue.Queue = queue.Queue()
    with _client(stack, "killer") as client, ThreadPoolExecutor(n_whole + n_streams) as pool:
        futures = [pool.submit(_whole, client, i) for i in range(n_whole)]
        futures += [pool.submit(_streamed, client, i, started) for i in range(n_streams)]
        # the victim is the worker of the first stream to start: that stream is cut mid-way, while
        # the non-streamed requests it also holds (32 tokens each) are still generating
        victim = [_name(i) for i in range(len(stack.worker_urls))].index(started.get(timeout=DEADLINE_S))
        assert _outstanding(stack)[stack.worker_urls[victim]] >= 2  # killed under load
        stack.workers[victim].send_signal(signal.SIGKILL)
        outcomes = [f.result(timeout=DEADLINE_S) for f in futures]
    kinds = [kind for kind, _ in outcomes]
    retries = _retries(stack) - retries_before
    print({k: kinds.count(k) for k in set(kinds)}, "retries", retries)
    assert kinds.count("whole") == n_whole  # all non-streamed requests were answered (failed over if needed)
    assert all(ok for kind, ok in outcomes if kind == "stream")
    assert kinds.count("cut") >= 1 and retries >= 1  # the kill hit a started stream and unstarted requests
    with _client(stack, "killer") as client:
        for i in range(3):  # afterwards, traffic keeps flowing to the survivor
            assert _whole(client, 100 + i, max_tokens=4)[1] == _name(1 - victim)
    stack.workers[victim].wait(timeout=5)
    _assert_settled(stack, "killer", n_whole + n_streams - kinds.count("503") + 3)
