"""A reload in the middle of a request never mixes snapshots, on every surface: the app takes the
`Services` snapshot once, on arrival (app.py's middleware), and every handler reads that one.

Each test holds its request after arrival (a middleware of the test's, inside the app's), swaps the
config for one whose only tier has another name and another worker, and lets the request go on: it
must be answered wholly from the config it arrived under."""
from __future__ import annotations

import asyncio

import pytest
import aiohttp
import yaml
from aiohttp import web

from gateway.app import build_app, start_site
from gateway.batches.runner import BatchRunner
from gateway.config import load_config
from gateway.core.classify import PromptLengthClassifier
from gateway.state import GatewayState
from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support.in_process import services_for
from tests.support.scripted_transport import ScriptedTransport, worker

HOLD = "x-test-hold"


class Held:
    """Requests that carry HOLD wait here after arrival until the test lets them go."""

    def __init__(self):
        self.arrived = asyncio.Event()
        self.go = asyncio.Event()

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        if HOLD in request.headers:
            self.arrived.set()
            await self.go.wait()
        return await handler(request)


@pytest.fixture
async def reloading(tmp_path, redis_prefix):
    """(url, send): a gateway whose one tier is `small` on worker A; `send(method, path, **kw)`
    holds the request after arrival, reloads to a config whose one tier is `tiny` on worker B,
    then lets it go, and returns (status, headers, body, A's and B's generation counts). The
    workers are played by the scripted transport."""
    url_a, url_b = "http://worker-a.test", "http://worker-b.test"
    transport = ScriptedTransport(worker)
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(base_config([tier("small", 1, [url_a])], redis_prefix)))
    state = GatewayState(load_config(path), str(path), classifier=PromptLengthClassifier(), transport=transport)
    held = Held()
    app = build_app(state)
    app.middlewares.append(held.middleware)
    runner = await start_site(app, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"

    async def send(method: str, route: str, **kwargs):
        async with aiohttp.ClientSession() as http:
            call = asyncio.ensure_future(http.request(method, url + route, headers={HOLD: "1"}, **kwargs))
            await asyncio.wait_for(held.arrived.wait(), 10)
            path.write_text(yaml.safe_dump(base_config([tier("tiny", 1, [url_b])], redis_prefix)))
            assert state.reload() and [t.name for t in state.services.config.tiers] == ["tiny"]
            held.go.set()
            async with await call as response:
                body = await response.json(content_type=None)
                return response.status, response.headers, body, transport.posts_to(url_a), transport.posts_to(url_b)

    yield send
    await runner.cleanup()


CHAT = {"model": "auto", "messages": [{"role": "user", "content": "hello"}]}


async def test_chat_is_served_by_the_config_it_arrived_under(reloading):
    status, headers, _, to_a, to_b = await reloading("POST", "/v1/chat/completions", json=CHAT)
    assert (status, headers["x-tiergate-tier"], to_a, to_b) == (200, "small", 1, 0)


@pytest.mark.parametrize("route, body", [
    ("/v1/messages", {"model": "auto", "max_tokens": 16, "messages": [{"role": "user", "content": "hello"}]}),
    ("/v1/responses", {"model": "auto", "input": "hello", "store": False}),
])
async def test_drop_in_translations_are_served_by_the_config_they_arrived_under(reloading, route, body):
    status, headers, _, to_a, to_b = await reloading("POST", route, json=body)
    assert (status, headers["x-tiergate-tier"], to_a, to_b) == (200, "small", 1, 0)


async def test_the_console_explains_with_the_config_it_arrived_under(reloading):
    status, _, about, *_ = await reloading("POST", "/console/api/route", json={"prompt": "hello"})
    assert status == 200 and about["tier"] == "small"


async def test_the_console_lists_the_models_of_the_config_it_arrived_under(reloading):
    status, _, routing, *_ = await reloading("GET", "/console/api/routing")
    assert status == 200 and routing["models"] == ["auto", "small"]


async def test_the_quality_summary_reads_the_config_it_arrived_under(reloading):
    status, _, summary, *_ = await reloading("GET", "/v1/quality")
    assert status == 200 and summary["top_tier"] == "small"


async def test_the_route_explanation_and_models_read_the_config_they_arrived_under(reloading):
    status, _, about, *_ = await reloading("POST", "/v1/route", json=CHAT)
    assert status == 200 and about["tier"] == "small"


async def test_a_batch_line_is_served_wholly_by_the_snapshot_current_when_it_starts(redis_prefix):
    """Each try of a line takes the services once: the tenant it runs as comes from that snapshot's
    policy, and the request path gets that same snapshot (a reload between two tries is fine)."""
    tenants = {"team": {"keys": [{"id": "k", "sha256": hash_key("team-key")}]}}
    old, new = (services_for(base_config([tier(name, 1, [url])], redis_prefix, tenants=tenants), ScriptedTransport(None))
                for name, url in (("small", "http://a.test"), ("tiny", "http://b.test")))
    snapshots = iter([old, new])
    served = []

    async def serve(services, call, gate):
        served.append(services)

    runner = BatchRunner(lambda: next(snapshots), serve)
    for expected in (old, new):
        services, tenant, bound = runner.bound("team", "k")
        await bound(None, None)
        assert services is expected and served[-1] is expected
        assert tenant is not None and tenant is expected.sinks.policy.holder("team", "k")
