"""`max_concurrent_requests`, per tenant and per key: a request past it is a 429 naming it on
every /v1 endpoint, and a place is held for the life of the request and given back however it
ends (answered, or its client gone). Workers are played by the scripted transport; the limits
are kept in the shared Redis."""
from __future__ import annotations

import asyncio
from dataclasses import replace

import aiohttp
import pytest

from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for
from tests.support.scripted_transport import ScriptedTransport, worker

WIDE, NARROW = "sk-open-wide-key", "sk-open-narrow-key"
CHAT = {"model": "small", "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture
async def held_gateway(gateway, redis_prefix):
    """(url, release, generations): chat answers wait for `release`; the tenant may have 2 requests
    open, its narrow key 1."""
    release = asyncio.Event()

    def script(sent):
        reply = worker(sent)
        if sent.url.endswith("/v1/chat/completions"):  # not the worker's count of a cancelled request
            reply = replace(reply, hold=release)
        return reply
    transport = ScriptedTransport(script)
    keys = [{"id": "wide", "sha256": hash_key(WIDE)},
            {"id": "narrow", "sha256": hash_key(NARROW), "rate_limits": {"max_concurrent_requests": 1}}]
    doc = base_config([tier("small", 1, ["http://worker.test"])], redis_prefix,
                      tenants={"acme": {"keys": keys, "rate_limits": {"max_concurrent_requests": 2}}})
    gw = await gateway(doc, transport=transport)
    yield gw.url, release, lambda: sum(s.url.endswith("/v1/chat/completions") for s in transport.sent)
    release.set()


async def _status(http: aiohttp.ClientSession, method: str, url: str, key: str, **kw) -> tuple[int, dict]:
    async with http.request(method, url, headers={"Authorization": f"Bearer {key}"}, **kw) as response:
        return response.status, await response.json(content_type=None)


async def test_past_the_tenant_limit_every_endpoint_answers_429_naming_it(held_gateway):
    url, release, generations = held_gateway
    async with aiohttp.ClientSession() as http:
        open_ = [asyncio.ensure_future(_status(http, "POST", url + "/v1/chat/completions", WIDE, json=CHAT))
                 for _ in range(2)]
        await wait_for(lambda: generations() == 2, timeout_s=10, what="two requests at the worker")
        for method, path in (("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("GET", "/v1/usage"),
                             ("GET", "/v1/files")):
            status, body = await _status(http, method, url + path, WIDE, **({"json": CHAT} if method == "POST" else {}))
            assert status == 429 and "rate_limits.max_concurrent_requests: 2" in body["error"]["message"], path
        release.set()
        assert [status for status, _ in await asyncio.gather(*open_)] == [200, 200]
        assert (await _status(http, "POST", url + "/v1/chat/completions", WIDE, json=CHAT))[0] == 200


async def test_a_client_that_goes_away_gives_its_place_back(held_gateway):
    url, _, generations = held_gateway
    async with aiohttp.ClientSession() as http:
        status, _ = await _status(http, "GET", url + "/v1/models", WIDE)
        assert status == 200
        async with aiohttp.ClientSession() as leaving:
            gone = [asyncio.ensure_future(_status(leaving, "POST", url + "/v1/chat/completions", WIDE,
                                                  json={**CHAT, "stream": True})) for _ in range(2)]
            await wait_for(lambda: generations() == 2, timeout_s=10, what="two streams at the worker")
            assert (await _status(http, "GET", url + "/v1/models", WIDE))[0] == 429
            for call in gone:
                call.cancel()

        async def free() -> bool:
            return (await _status(http, "GET", url + "/v1/models", WIDE))[0] == 200
        # the connections closed: the handlers are cancelled and their places given back
        await wait_for(free, timeout_s=10, what="a place free again")


async def test_a_key_has_its_own_limit_within_the_tenants(held_gateway):
    url, release, generations = held_gateway
    async with aiohttp.ClientSession() as http:
        first = asyncio.ensure_future(_status(http, "POST", url + "/v1/chat/completions", NARROW, json=CHAT))
        await wait_for(lambda: generations() == 1, timeout_s=10, what="the narrow key's request at the worker")
        status, body = await _status(http, "POST", url + "/v1/route", NARROW, json=CHAT)
        assert status == 429 and "keys[].rate_limits.max_concurrent_requests: 1" in body["error"]["message"]
        assert "'narrow'" in body["error"]["message"]
        assert (await _status(http, "GET", url + "/v1/models", WIDE))[0] == 200  # the tenant has a second place
        release.set()
        assert (await first)[0] == 200
