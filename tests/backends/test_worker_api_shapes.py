"""The fake upstream (launcher/fake_upstream.py) answers like the real worker: the same requests on
every route of the worker's API (webwire/worker_api.py), the abort route included, get the same
status and answers of the same shape (the same keys all the way down, values of the same types), so
a gateway test against the fake tests what the gateway will meet."""
from __future__ import annotations

import json

import aiohttp
import pytest

from launcher.fake_upstream import start_fake
from webwire.worker_api import ROUTES, abort_url

MODEL = "smollm2-135m"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 3, "temperature": 0}
COMPLETION = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 3, "temperature": 0}


def shape(value):
    """What a client can rely on: keys, nesting and value types; never the values themselves."""
    if isinstance(value, dict):
        return {key: shape(v) for key, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


def sse_events(raw: str) -> list:
    return [line[len("data: "):] for line in raw.splitlines() if line.startswith("data: ")]


async def answer(http: aiohttp.ClientSession, method: str, url: str, body: dict | None, request_id: str):
    """(status, shape of the answer): JSON answers by shape, streams by the shape of each kind of
    event, Prometheus text by its content type."""
    async with http.request(method, url, json=body, headers={"x-request-id": request_id}) as response:
        text = await response.text()
        kind = response.content_type
        if kind == "text/event-stream":
            events = sse_events(text)
            chunks = [json.loads(e) for e in events if e != "[DONE]"]
            return response.status, {"content": shape(next(c for c in chunks if c["choices"])),
                                     "usage": shape(next(c for c in chunks if c.get("usage"))), "last": events[-1]}
        if kind == "application/json":
            return response.status, shape(json.loads(text))
        return response.status, kind


CASES = [  # (name, method, path, body); abort cases name the request they abort
    ("chat", "POST", "/v1/chat/completions", CHAT),
    ("chat stream", "POST", "/v1/chat/completions", {**CHAT, "stream": True, "stream_options": {"include_usage": True}}),
    ("completion", "POST", "/v1/completions", COMPLETION),
    ("completion stream", "POST", "/v1/completions",
     {**COMPLETION, "stream": True, "stream_options": {"include_usage": True}}),
    ("bad input", "POST", "/v1/chat/completions", {"model": MODEL, "messages": []}),
    ("models", "GET", "/v1/models", None),
    ("health", "GET", "/health", None),
    ("metrics", "GET", "/metrics", None),
]


@pytest.fixture
async def fake_url():
    fake, runner, url = await start_fake(name=MODEL)
    fake.abortable = True  # as our workers (a fake may also play a foreign upstream without the route)
    yield url
    await runner.cleanup()


def test_every_route_of_the_table_is_checked_here():
    checked = {(method, path) for _, method, path, _ in CASES} | {("POST", "/v1/internal/requests/{request_id}/abort")}
    generate_routes = {(r.method, r.path) for r in ROUTES if "generate" in r.tasks}
    assert generate_routes <= checked


@pytest.mark.parametrize("name, method, path, body", CASES, ids=[c[0] for c in CASES])
async def test_the_fake_answers_each_route_like_the_worker(shared_worker, fake_url, name, method, path, body):
    async with aiohttp.ClientSession() as http:
        real = await answer(http, method, shared_worker + path, body, f"shape-real-{name}")
        fake = await answer(http, method, fake_url + path, body, f"shape-fake-{name}")
    assert fake == real


async def test_the_fake_answers_the_abort_route_like_the_worker(shared_worker, fake_url):
    """A request that ran: its usage; one that never came (no wait): 404; a bad wait: 400."""
    async with aiohttp.ClientSession() as http:
        for base, who in ((shared_worker, "real"), (fake_url, "fake")):
            await answer(http, "POST", base + "/v1/chat/completions", CHAT, f"shape-abort-{who}")
        answers = {}
        for base, who in ((shared_worker, "real"), (fake_url, "fake")):
            answers[who] = [await answer(http, "POST", abort_url(base, f"shape-abort-{who}", 1), None, "x"),
                            await answer(http, "POST", abort_url(base, f"never-{who}", 0), None, "x"),
                            await answer(http, "POST", abort_url(base, f"shape-abort-{who}", 1) + "0000", None, "x")]
    assert [status for status, _ in answers["real"]] == [200, 404, 400]
    assert answers["fake"] == answers["real"]
