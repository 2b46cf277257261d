"""Budget alerts on two real gateway replicas: 200 concurrent requests that take a tenant past
50% and 80% (not 100%) of its budget produce exactly one webhook delivery per threshold, counted
by idempotency id at a local receiver, signed with HMAC, also when the receiver fails twice, and
when the replica delivering is killed mid-delivery (the other delivers once its lease ends)."""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import signal
from collections import Counter

import aiohttp
import pytest
from aiohttp import web

from policies.keys import hash_key
from tests.support import free_port, wait_for
from tests.support.metrics import metric
from tests.support.stack import Stack

ADMIN, PROBE = "sk-alerts-admin", "sk-alerts-probe"
SECRET_ENV, SECRET = "TIERGATE_TEST_ALERT_SECRET", "whsec-test-alerts"
BODY = {"model": "small", "messages": [{"role": "user", "content": "the same question"}], "max_tokens": 5}


class Receiver:
    """Counts deliveries by idempotency id; refuses the first `failures`; with `hold_first`, never
    answers the first delivery (its path, /a or /b, says which replica sent it: `held_path`)."""

    def __init__(self, failures: int = 0, hold_first: bool = False):
        self.failures, self.hold_first, self.held_path = failures, hold_first, None
        self.accepted: Counter = Counter()  # idempotency id -> 2xx answers given
        self.seen: list[tuple[str, str]] = []  # (path, id) of every POST
        self.held = asyncio.Event()
        self.bad_signatures = 0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        stamp, given = request.headers["X-Tiergate-Timestamp"], request.headers["X-Tiergate-Signature"]
        expected = "sha256=" + hmac.new(SECRET.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(given, expected):
            self.bad_signatures += 1
            return web.Response(status=401)
        key = request.headers["Idempotency-Key"]
        self.seen.append((request.path, key))
        if self.hold_first and not self.held.is_set():
            self.held_path = request.path
            self.held.set()
            await asyncio.sleep(3600)  # never answers: its replica dies holding it
        if self.failures > 0:
            self.failures -= 1
            return web.Response(status=500)
        self.accepted[key] += 1
        return web.json_response({"ok": True})

    async def start(self) -> tuple[str, web.AppRunner]:
        app = web.Application()
        app.router.add_post("/{path:.*}", self.handle)
        runner = web.AppRunner(app, handler_cancellation=True)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        return f"http://127.0.0.1:{port}", runner


def config(upstream: str, logs: str, hook: str) -> dict:
    return {"tiers": [{"name": "small", "level": 1, "model": "m", "price_per_mtok": {"input": 1, "output": 2},
                       "workers": [{"url": upstream}]}],
            "redis": {"socket_timeout_s": 5},
            "policy": {"admin_key_sha256": hash_key(ADMIN), "usage_log": {"dir": logs},
                       "alerts": {"webhook_url": hook, "secret_env": SECRET_ENV, "timeout_s": 1.0,
                                  "thresholds_percent": [50, 80, 100]}},
            "tenants": {"probe": {"keys": [{"id": "k", "sha256": hash_key(PROBE)}]}}}


async def _post(http, url: str, key: str, path: str, body: dict) -> tuple[int, dict]:
    async with http.post(url + path, json=body, headers={"Authorization": f"Bearer {key}"}) as answer:
        return answer.status, await answer.json()


async def _spend_tenant(http, urls: list[str], name: str) -> None:
    """A tenant whose soft budget 200 requests take to 90%: past 50 and 80, short of 100."""
    status, answer = await _post(http, urls[0], PROBE, "/v1/chat/completions", BODY)
    assert status == 200
    usage = answer["usage"]
    cost = usage["prompt_tokens"] * 1 + usage["completion_tokens"] * 2  # micro-USD at $1/$2 per Mtok
    soft_micro = round(200 * cost / 0.9)
    status, _ = await _post(http, urls[0], ADMIN, "/admin/tenants", {"name": name, "policy": {
        "budgets": {"daily_usd": {"soft": soft_micro / 1e6}}, "soft_budget_action": "none"}})
    assert status == 200
    status, key = await _post(http, urls[0], ADMIN, "/admin/keys", {"tenant": name})
    assert status == 200
    await wait_for(lambda: _served(http, urls[1], key["secret"]), 10, what="key on the other replica")
    answers = await asyncio.gather(*(_post(http, urls[i % 2], key["secret"], "/v1/chat/completions", BODY)
                                     for i in range(199)))  # the 200th was the readiness probe above
    assert [s for s, _ in answers].count(200) == 199


async def _served(http, url: str, secret: str) -> bool:
    status, _ = await _post(http, url, secret, "/v1/chat/completions", BODY)
    return status == 200


async def _alerts(http, url: str) -> list[dict]:
    async with http.get(url + "/admin/alerts?limit=100", headers={"Authorization": f"Bearer {ADMIN}"}) as answer:
        assert answer.status == 200
        return (await answer.json())["data"]


@pytest.fixture
def stack_factory(tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)  # the gateway processes inherit it
    stacks = []

    def make(hooks: list[str]) -> Stack:
        stack = Stack(tmp_path / f"s{len(stacks)}", "alerts")
        stacks.append(stack)
        upstream, = stack.start_upstreams(1)
        for hook in hooks:
            stack.start_gateways(config(upstream, str(tmp_path / "logs"), hook))
        return stack

    yield make
    for stack in stacks:
        stack.close()


async def test_crossing_two_thresholds_on_two_replicas_delivers_each_once_despite_two_failures(stack_factory):
    receiver = Receiver(failures=2)
    hook, runner = await receiver.start()
    try:
        stack = await asyncio.to_thread(stack_factory, [hook + "/a", hook + "/b"])
        async with aiohttp.ClientSession() as http:
            await _spend_tenant(http, stack.urls, "spender")
            await wait_for(lambda: len(receiver.accepted) == 2, 30, what="two alerts delivered")
            alerts = await wait_for(lambda: _all_delivered(http, stack.urls[1]), 10, what="status delivered")
            fired = 0
            for url in stack.urls:
                async with http.get(url + "/metrics", headers={"Authorization": f"Bearer {ADMIN}"}) as r:
                    page = await r.text()
                fired += sum(metric(page, "tiergate_budget_alerts_total", 0, tenant="spender", budget="daily",
                                    threshold_percent=p) for p in ("50", "80", "100"))
    finally:
        await runner.cleanup()
    assert sorted(a["percent"] for a in alerts) == [50, 80]
    assert set(receiver.accepted) == {a["id"] for a in alerts} and all(n == 1 for n in receiver.accepted.values())
    assert sum(a["attempts"] for a in alerts) == 4 and receiver.bad_signatures == 0  # two refused, two taken
    assert fired == 2


async def _all_delivered(http, url: str):
    alerts = [a for a in await _alerts(http, url) if a["tenant"] == "spender"]
    return len(alerts) == 2 and all(a["status"] == "delivered" for a in alerts) and alerts


async def test_a_replica_killed_mid_delivery_leaves_it_to_the_other(stack_factory):
    receiver = Receiver(hold_first=True)
    hook, runner = await receiver.start()
    try:
        stack = await asyncio.to_thread(stack_factory, [hook + "/a", hook + "/b"])
        async with aiohttp.ClientSession() as http:
            await _spend_tenant(http, stack.urls, "spender")
            await asyncio.wait_for(receiver.held.wait(), 30)  # one replica is posting an alert and waits
            os.kill(stack.gateways[0 if receiver.held_path == "/a" else 1].pid, signal.SIGKILL)
            await wait_for(lambda: len(receiver.accepted) == 2, 40, what="both delivered by the other")
    finally:
        await runner.cleanup()
    held_id = next(key for path, key in receiver.seen if path == receiver.held_path)
    other = "/b" if receiver.held_path == "/a" else "/a"
    assert all(n == 1 for n in receiver.accepted.values()) and held_id in receiver.accepted
    assert any(path == other and key == held_id for path, key in receiver.seen)
