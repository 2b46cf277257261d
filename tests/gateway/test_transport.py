"""The transport seam (gateway/core/transport.py): aiohttp's post with the configured timeouts bound."""
from __future__ import annotations

import aiohttp
import pytest

from gateway.core.transport import http_post


async def test_a_post_before_the_gateway_started_says_so():
    with pytest.raises(RuntimeError, match="before the gateway started"):
        await http_post(None, 1.0, 5.0)("http://a.test/v1/chat/completions", data=b"{}", headers={})


async def test_the_configured_timeouts_hold_and_a_call_may_name_its_own(fakes):
    ((fake, url),) = await fakes(1)
    async with aiohttp.ClientSession() as session:
        post = http_post(session, 1.5, 7.0)
        timeout = post.keywords["timeout"]
        assert (timeout.total, timeout.connect, timeout.sock_read) == (None, 1.5, 7.0)  # a long stream may go on
        body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
        response = await post(url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"},
                              timeout=aiohttp.ClientTimeout(total=30))
        assert response.status == 200 and (await response.json())["choices"]
        response.release()
