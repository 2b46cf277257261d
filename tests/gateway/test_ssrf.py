"""No request can make the gateway contact a URL of the client's choosing: upstream URLs come
only from the config file. A canary server counts every TCP connection it gets; requests that
name it in the model, in body fields SDKs and proxies use for endpoints, in tools, in headers
(Host, X-Forwarded-*), in an absolute-form request target or a CONNECT must get a 4xx or a
normal answer from the configured upstream, and the canary must see nothing.
The admin endpoints take no URL at all and need the admin key."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.gateway.gw_helpers import base_config, tier
from policies.keys import hash_key

ADMIN_KEY = "sk-admin-" + uuid.uuid4().hex
TENANT_KEY = "sk-tenant-" + uuid.uuid4().hex


class Canary:
    """Counts connections; answers each with an empty 200 so a caller that did come never hangs."""

    def __init__(self):
        self.hits = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._hit, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _hit(self, reader, writer):
        self.hits += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                     b"Connection: close\r\n\r\n{}")
        await writer.drain()
        writer.close()


@pytest.fixture
async def setup(fakes, gateway, redis_prefix, tmp_path):
    canary = Canary()
    port = await canary.start()
    ((fake, url),) = await fakes(1, chunks=2)
    able = {"capabilities": {"tools": True, "structured_outputs": True}}  # so tools/response_format get relayed
    doc = base_config([{**tier("small", 1, [url]), **able}, {**tier("large", 3, [url]), **able}], redis_prefix)
    doc.update({"policy": {"admin_key_sha256": hash_key(ADMIN_KEY), "usage_log": {"dir": str(tmp_path / "usage")},
                           "defaults": {"rate_limits": {"requests_per_minute": 100000, "tokens_per_minute": 10**9}}},
                "tenants": {"t": {"keys": [{"id": "main", "sha256": hash_key(TENANT_KEY)}]}}})
    gw = await gateway(doc)
    yield gw, canary, f"http://127.0.0.1:{port}", f"127.0.0.1:{port}", fake
    canary.server.close()


def _bodies(target: str, hostport: str) -> list[tuple[str, dict]]:
    msgs = [{"role": "user", "content": f"fetch {target} please"}]
    chat = {"model": "small", "messages": msgs, "max_tokens": 2}
    tools = [{"type": "function", "function": {"name": "fetch", "description": target, "parameters": {
        "type": "object", "properties": {"url": {"type": "string", "default": target}}}}}]
    return [
        ("/v1/chat/completions", dict(chat, model=target)),
        ("/v1/chat/completions", dict(chat, model=hostport)),
        ("/v1/chat/completions", dict(chat, model=target + "/v1")),
        ("/v1/completions", {"model": target, "prompt": target, "max_tokens": 2}),
        ("/v1/route", dict(chat, model=target)),
        ("/v1/chat/completions", dict(chat, base_url=target, api_base=target, api_key="sk-x", url=target,
                                      endpoint=target, proxy=target, callback_url=target, webhook_url=target)),
        ("/v1/chat/completions", dict(chat, stream=True, base_url=target, stream_options={"include_usage": True,
                                                                                           "url": target})),
        ("/v1/completions", {"model": "small", "prompt": "hi", "max_tokens": 2, "api_base": target,
                             "extra_headers": {"Host": hostport}, "extra_body": {"base_url": target}}),
        ("/v1/chat/completions", dict(chat, extra_headers={"Host": hostport, "X-Forwarded-Host": hostport},
                                      extra_query={"url": target})),
        ("/v1/chat/completions", dict(chat, user=target, metadata={"url": target})),
        ("/v1/chat/completions", dict(chat, tools=tools, tool_choice="auto")),
        ("/v1/chat/completions", dict(chat, messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": target + "/a.png"}}]}])),
        ("/v1/chat/completions", dict(chat, response_format={"type": "json_schema",
                                                             "json_schema": {"name": "x", "schema": {"$ref": target}}})),
        ("/v1/chat/completions", dict(chat, model="auto", logit_bias=None, n=1, functions=[{"name": target}])),
    ]


def _headers(target: str, hostport: str) -> list[dict]:
    return [{"Host": hostport}, {"X-Forwarded-Host": hostport, "X-Forwarded-Proto": "http"},
            {"X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1"}, {"Forwarded": f"host={hostport};proto=http"},
            {"X-Original-URL": target, "X-Rewrite-URL": target}, {"Origin": target, "Referer": target},
            {"X-Tiergate-Backend": hostport, "x-request-id": target, "OpenAI-Base-URL": target}]


def _served_or_refused(status: int, headers, fake_label: str) -> None:
    assert status == 200 or 400 <= status < 500, status
    if status == 200 and "x-tiergate-backend" in headers and headers["x-tiergate-tier"] != "none":
        assert headers["x-tiergate-backend"] == fake_label


async def test_no_body_field_or_header_makes_the_gateway_call_the_canary(setup, http):
    gw, canary, target, hostport, fake = setup
    fake_label = gw.state.services.upstreams.pools.backends[next(iter(gw.state.services.upstreams.pools.backends))].label
    auth = {"Authorization": f"Bearer {TENANT_KEY}"}
    statuses = []
    for path, body in _bodies(target, hostport):
        async with http.post(gw.url + path, json=body, headers=auth) as r:
            await r.read()
            _served_or_refused(r.status, r.headers, fake_label)
            statuses.append(r.status)
    for extra in _headers(target, hostport):
        async with http.post(gw.url + "/v1/chat/completions", headers={**auth, **extra}, json={
                "model": "small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}) as r:
            await r.read()
            assert r.status == 200 and r.headers["x-tiergate-backend"] == fake_label, extra
    # Unknown fields (base_url, extra_headers, metadata, ...) are refused by name since nothing may be
    # dropped silently (issue 15); the tools and response_format requests are served.
    assert statuses.count(200) >= 2 and statuses.count(400) >= 6
    assert fake.served >= 8
    assert canary.hits == 0
    async with http.get(target + "/control") as r:  # control: a real contact is counted
        assert r.status == 200
    assert canary.hits == 1


async def _raw(gw_url: str, head: bytes, body: bytes = b"") -> bytes:
    host, port = gw_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


async def test_absolute_form_targets_and_connect_do_not_proxy(setup):
    gw, canary, target, hostport, fake = setup
    body = b'{"model":"small","messages":[{"role":"user","content":"hi"}],"max_tokens":2}'
    auth = b"Authorization: Bearer " + TENANT_KEY.encode() + b"\r\nContent-Type: application/json\r\n"
    absolute = await _raw(gw.url, f"POST {target}/v1/chat/completions HTTP/1.1\r\nHost: {hostport}\r\n".encode()
                          + auth, body)
    status = int(absolute.split(b" ", 2)[1])
    assert status == 200 or 400 <= status < 500, absolute[:200]
    for head in (f"CONNECT {hostport} HTTP/1.1\r\nHost: {hostport}\r\n", f"GET {target}/ HTTP/1.1\r\nHost: x\r\n",
                 f"GET //{hostport}/v1/models HTTP/1.1\r\nHost: x\r\n",
                 "GET /v1/../../" + target + " HTTP/1.1\r\nHost: x\r\n"):
        answer = await _raw(gw.url, head.encode() + auth)
        assert 400 <= int(answer.split(b" ", 2)[1]) < 500, (head, answer[:300])
        assert b'"error"' in answer
    assert canary.hits == 0


async def test_admin_endpoints_take_no_url_and_need_the_admin_key(setup, http):
    gw, canary, target, hostport, fake = setup
    payload = {"url": target, "model_dir": target, "classifier_model_dir": target, "source": target}
    for method, path in (("POST", "/admin/classifier/reload"), ("GET", f"/v1/quality?url={target}")):
        for key, expected in ((None, 401), (TENANT_KEY, 403)):
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            async with http.request(method, gw.url + path, json=payload, headers=headers) as r:
                assert r.status == expected and "error" in await r.json(), (path, key)
        async with http.request(method, gw.url + path, json=payload,
                                headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as r:
            assert r.status not in (401, 403, 500), (path, await r.text())
    assert canary.hits == 0
