"""/v1/embeddings failover against fake upstreams: another worker of the embeddings tier takes over,
and a failing embeddings tier never escalates to a chat tier."""
from __future__ import annotations

import openai
import pytest

from gateway.core.metrics import METRICS
from tests.gateway.gw_helpers import base_config, tier


def _client(gw) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0, timeout=10)


async def test_retries_on_another_embeddings_worker(fakes, gateway, redis_prefix):
    (bad, bad_url), (good, good_url) = await fakes(2)
    bad.fail_status = 502
    gw = await gateway(base_config([tier("chat", 1, [good_url])], redis_prefix,
                                   embeddings=[tier("vectors", 1, [bad_url, good_url])]))
    retries = METRICS.retries.labels("vectors")._value.get()
    async with _client(gw) as client:
        for _ in range(3):
            out = await client.embeddings.create(model="vectors", input=["a", "b"], encoding_format="float")
            assert len(out.data) == 2 and out.data[0].embedding == [0.125] * 8
    assert good.served == 3 and bad.served == 0
    assert METRICS.retries.labels("vectors")._value.get() > retries


async def test_failing_embeddings_tier_does_not_escalate_to_chat(fakes, gateway, redis_prefix):
    (bad, bad_url), (good, good_url) = await fakes(2)
    bad.fail_status = 500
    gw = await gateway(base_config([tier("chat", 5, [good_url])], redis_prefix,
                                   embeddings=[tier("vectors", 1, [bad_url])]))
    async with _client(gw) as client:
        with pytest.raises(openai.APIStatusError) as err:
            await client.embeddings.create(model="vectors", input="a")
    assert err.value.status_code == 503 and good.served == 0
