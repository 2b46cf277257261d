"""/v1/embeddings failover with the workers played by the scripted transport: another worker of the
embeddings tier takes over, and a failing embeddings tier never escalates to a chat tier."""
from __future__ import annotations

import openai
import pytest

from gateway.core.metrics import METRICS
from tests.gateway.gw_helpers import base_config, tier
from tests.support.scripted_transport import Reply, ScriptedTransport, Sent, worker

BAD, GOOD = "http://bad.test", "http://good.test"


def _failing(status: int):
    """A script where BAD answers every POST with `status` (its health checks pass) and GOOD is healthy."""
    def script(sent: Sent) -> Reply:
        if sent.method == "POST" and sent.url.startswith(BAD):
            return Reply(status=status, body={"error": {"message": "worker failed", "type": "server_error"}})
        return worker(sent)
    return ScriptedTransport(script)


def _client(gw) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0, timeout=10)


async def test_retries_on_another_embeddings_worker(gateway, redis_prefix):
    transport = _failing(502)
    gw = await gateway(base_config([tier("chat", 1, [GOOD])], redis_prefix,
                                   embeddings=[tier("vectors", 1, [BAD, GOOD])]), transport=transport)
    retries = METRICS.retries.labels("vectors")._value.get()
    async with _client(gw) as client:
        for _ in range(3):
            out = await client.embeddings.create(model="vectors", input=["a", "b"], encoding_format="float")
            assert len(out.data) == 2 and out.data[0].embedding == [0.125] * 8
    assert transport.posts_to(GOOD) == 3  # every answer is the good worker's
    assert METRICS.retries.labels("vectors")._value.get() > retries


async def test_failing_embeddings_tier_does_not_escalate_to_chat(gateway, redis_prefix):
    transport = _failing(500)
    gw = await gateway(base_config([tier("chat", 5, [GOOD])], redis_prefix,
                                   embeddings=[tier("vectors", 1, [BAD])]), transport=transport)
    async with _client(gw) as client:
        with pytest.raises(openai.APIStatusError) as err:
            await client.embeddings.create(model="vectors", input="a")
    assert err.value.status_code == 503 and transport.posts_to(GOOD) == 0 and transport.posts_to(BAD) >= 1
