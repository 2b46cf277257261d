"""Slow clients are cut off by the server: late request headers close the connection
(limits.header_read_timeout_s), a body that trickles in is a 408 naming
limits.body_read_timeout_s. On sockets: what is tested is the connection itself."""
from __future__ import annotations

import asyncio
import json

import pytest

from tests.gateway.gw_helpers import base_config, tier
from tests.support.scripted_transport import ScriptedTransport, worker

DEADLINE_S = 20  # how long the test waits for the gateway to act; the gateway's own timeouts are 0.5 s


@pytest.fixture
async def impatient(gateway, redis_prefix):
    doc = base_config([tier("small", 1, ["http://worker.test"])], redis_prefix,
                      limits={"header_read_timeout_s": 0.5, "body_read_timeout_s": 0.5})
    gw = await gateway(doc, transport=ScriptedTransport(worker))
    host, port = gw.url.removeprefix("http://").split(":")
    return host, int(port)


async def test_a_connection_whose_headers_never_end_is_closed(impatient):
    reader, writer = await asyncio.open_connection(*impatient)
    try:
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-Slow: ")  # and then nothing
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), DEADLINE_S) == b""  # closed, nothing answered
    finally:
        writer.close()


async def test_a_body_that_trickles_in_is_a_408_naming_the_setting(impatient):
    body = json.dumps({"model": "small", "messages": [{"role": "user", "content": "hi"}]}).encode()
    reader, writer = await asyncio.open_connection(*impatient)
    try:
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])  # the rest never comes
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), DEADLINE_S)
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        payload = await asyncio.wait_for(reader.readexactly(length), DEADLINE_S)
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 408")
    assert b"limits.body_read_timeout_s" in payload


async def test_a_prompt_client_is_served_on_the_same_settings(impatient):
    body = json.dumps({"model": "small", "messages": [{"role": "user", "content": "hi"}]}).encode()
    reader, writer = await asyncio.open_connection(*impatient)
    try:
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), DEADLINE_S)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200")
