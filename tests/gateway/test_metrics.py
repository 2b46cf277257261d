"""/metrics carries requests, tokens, cost, latency histograms and classifier timing, with bounded labels."""
from __future__ import annotations

import re

import openai
import prometheus_client

from gateway.core.metrics import Counter, Histogram
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


def test_labels_children_are_remembered_and_count_like_prometheus_clients():
    """gateway/core/metrics.py's labels() hands back the same child per label values, and what it counts
    reaches the registry exactly as prometheus_client's own labels() would."""
    registry = prometheus_client.CollectorRegistry()
    served = Counter("t_served_total", "served", ["tier", "status"], registry=registry)
    timing = Histogram("t_seconds", "timing", ["tier"], buckets=(0.1, 1.0), registry=registry)
    assert served.labels("small", "200") is served.labels("small", "200")
    served.labels("small", "200").inc()
    served.labels("small", 200).inc(2)  # prometheus_client takes str(): the same series
    served.labels(tier="small", status="200").inc(4)
    served.labels("big", ["odd"]).inc()  # unhashable: prometheus_client's str() of it
    timing.labels("small").observe(0.5)
    assert registry.get_sample_value("t_served_total", {"tier": "small", "status": "200"}) == 7
    assert registry.get_sample_value("t_served_total", {"tier": "big", "status": "['odd']"}) == 1
    assert registry.get_sample_value("t_seconds_bucket", {"tier": "small", "le": "1.0"}) == 1
    assert registry.get_sample_value("t_seconds_bucket", {"tier": "small", "le": "0.1"}) == 0
