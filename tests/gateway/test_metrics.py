"""/metrics carries requests, tokens, cost, latency histograms and classifier timing, with bounded labels."""
from __future__ import annotations

import re

import openai

from tests.gateway.gw_helpers import base_config, tier
from tests.support.metrics import metric


def _value(page: str, name: str, **labels) -> float:
    return metric(page, name, default=0.0, **labels)  # "before" pages have no samples yet


async def test_metrics_account_tokens_cost_and_latency(fakes, gateway, redis_prefix, http):
    (fake, url), = await fakes(1, chunks=4)
    gw = await gateway(base_config([tier("small", 1, [url], model="m-small", price=(1_000_000.0, 2_000_000.0))],
                                   redis_prefix))
    async with http.get(gw.url + "/metrics") as response:
        before = await response.text()
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0) as client:
        whole = await client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}],
                                                     extra_headers={"x-request-id": "never-a-label"})
        stream = await client.chat.completions.create(model="small", messages=[{"role": "user", "content": "hi"}],
                                                      stream=True)
        async for _ in stream:
            pass
    async with http.get(gw.url + "/metrics") as response:
        text = await response.text()
    labels = {"tenant": "anonymous", "tier": "small", "model": "m-small"}
    assert _value(text, "tiergate_requests_total", status="200", **labels) - \
        _value(before, "tiergate_requests_total", status="200", **labels) == 2
    out = _value(text, "tiergate_tokens_total", direction="out", **labels) - \
        _value(before, "tiergate_tokens_total", direction="out", **labels)
    tokens_in = _value(text, "tiergate_tokens_total", direction="in", **labels) - \
        _value(before, "tiergate_tokens_total", direction="in", **labels)
    assert out == 8 and tokens_in == 2 * whole.usage.prompt_tokens
    cost = _value(text, "tiergate_cost_usd_total", **labels) - _value(before, "tiergate_cost_usd_total", **labels)
    assert abs(cost - (tokens_in * 1.0 + out * 2.0)) < 1e-6  # prices are per million tokens
    for histogram in ("tiergate_ttft_seconds_count", "tiergate_request_duration_seconds_count",
                      "tiergate_time_per_output_token_seconds_count"):
        assert _value(text, histogram, tier="small") > _value(before, histogram, tier="small"), histogram
    assert _value(text, "tiergate_classifier_seconds_count", classifier="prompt-length-rule") >= 1
    assert "never-a-label" not in text
    assert not re.search(r'(request_id|api_key|user)="', text)
