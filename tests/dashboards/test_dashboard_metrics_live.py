"""Must show 1: no panel points at a metric that does not exist.

Starts a real inference worker (smollm2-135m) and a real gateway process in front of it, sends
some traffic with the openai client, then checks that every metric name used by any dashboard
query, variable or annotation is exposed by the live /metrics of the gateway (tiergate_*) or
of the worker (tiergate_worker_*).
"""
from __future__ import annotations

import openai
import pytest

from tests.dashboards.dash_helpers import dashboards, exposed_names
from dashboards.promql import dashboard_exprs, metric_names
from tests.gateway.e2e_stack import MODEL, e2e_stack
from tests.support import wait_until
from tests.support.metrics import metric, samples, scrape
from tests.support.kinds import starts_processes


def _tiers(urls: list[str]) -> list[dict]:
    # Two tiers on the one worker: the classifier/auto path and an explicit tier both get traffic.
    return [{"name": name, "level": level, "model": MODEL, "workers": [{"url": urls[0]}],
             "price_per_mtok": {"input": price[0], "output": price[1]}}
            for name, level, price in (("small", 1, (0.1, 0.2)), ("large", 3, (2.5, 10.0)))]


@pytest.fixture(scope="module")
@starts_processes
def live(tmp_path_factory, shared_worker):
    with e2e_stack(tmp_path_factory.mktemp("dash-live"), _tiers, n_workers=0, running_workers=(shared_worker,)) as stack:
        worker = stack.worker_urls[0]  # the session's: counted from here, once what others sent has ended
        wait_until(lambda: metric(scrape(worker), "tiergate_worker_num_requests_running") == 0,
                   what="the shared worker idle")
        before = scrape(worker)
        client = openai.OpenAI(base_url=stack.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        question = [{"role": "user", "content": "Name one colour."}]
        client.chat.completions.create(model="auto", messages=question, max_tokens=3)
        stream = client.chat.completions.create(model="large", messages=question, max_tokens=4, stream=True,
                                                temperature=0)
        chunks = [c.choices[0] for c in stream if c.choices]
        assert "".join(c.delta.content or "" for c in chunks).strip(), chunks  # the stream carried text
        assert chunks[-1].finish_reason in ("stop", "length"), chunks
        client.completions.create(model="small", prompt="The sky is", max_tokens=3)
        yield scrape(stack.url), scrape(worker), before


def _used_metrics() -> dict[str, set[str]]:
    used: dict[str, set[str]] = {}
    for file, dashboard in dashboards().items():
        for where, expr in dashboard_exprs(dashboard):
            for name in metric_names(expr):
                used.setdefault(name, set()).add(f"{file}: {where}")
    return used


def test_every_dashboard_metric_is_exposed(live):
    gateway_page, worker_page, _ = live
    gateway, worker = exposed_names(gateway_page), exposed_names(worker_page)
    used = _used_metrics()
    assert len(used) >= 30  # the three dashboards together
    missing = {name: sorted(where) for name, where in used.items()
               if name not in (worker if name.startswith("tiergate_worker_") else gateway)}
    assert not missing, f"dashboard queries use metrics that no live /metrics exposes: {missing}"


def test_traffic_reached_the_cost_and_latency_series(live):
    """Not only declared: the series the panels plot carry this traffic's values."""
    gateway_page, worker_page, worker_before = live
    cost = sum(v for labels, v in samples(gateway_page, "tiergate_cost_usd_total") if labels["tenant"] == "anonymous")
    top = sum(v for _, v in samples(gateway_page, "tiergate_cost_top_tier_usd_total"))
    saved = sum(v for _, v in samples(gateway_page, "tiergate_cost_saved_usd_total"))
    assert cost > 0 and top > cost and abs(top - cost - saved) < 1e-9
    reasons = {(labels["tier"], labels["reason"]): v
               for labels, v in samples(gateway_page, "tiergate_routed_requests_total") if v}
    assert reasons[("large", "explicit")] == 1 and reasons[("small", "explicit")] == 1
    assert sum(v for (_, reason), v in reasons.items() if reason == "classifier") == 1
    assert sum(v for _, v in samples(gateway_page, "tiergate_classifier_predictions_total")) == 1
    assert [v for labels, v in samples(gateway_page, "tiergate_ttft_seconds_count") if labels["tier"] == "large"] == [1]

    def counted(name: str) -> float:  # on the shared worker, since this module's traffic began
        return sum(v for _, v in samples(worker_page, name)) - sum(v for _, v in samples(worker_before, name))

    assert counted("tiergate_worker_e2e_request_latency_seconds_count") == 3
    assert counted("tiergate_worker_prefix_cache_queries_total") > 0
