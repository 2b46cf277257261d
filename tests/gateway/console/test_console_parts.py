"""The console's pure parts: Prometheus text reading, quantiles from histogram buckets, the
quality time series, and the Basic-to-bearer translation of the console's credentials."""
from __future__ import annotations

import base64

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from gateway.console import promtext
from gateway.console.access import as_bearer
from gateway.console.quality import failure_series, similarity_histogram


def _exposition(observations: list[float]) -> dict:
    registry = CollectorRegistry()
    h = Histogram("demo_seconds", "demo", ["model"], buckets=(0.1, 0.2, 0.4, 0.8), registry=registry)
    c = Counter("demo_requests", "demo", ["tier"], registry=registry)
    for i, value in enumerate(observations):
        h.labels("a" if i % 2 else "b").observe(value)
        c.labels("small" if i % 3 else "large").inc()
    return promtext.samples(generate_latest(registry).decode())


def test_quantile_interpolates_inside_the_bucket_over_all_series():
    found = _exposition([0.05] * 50 + [0.3] * 50)  # half in (0, 0.1], half in (0.2, 0.4]
    assert promtext.quantile(found, "demo_seconds", 0.5) == pytest.approx(0.1)
    assert promtext.quantile(found, "demo_seconds", 0.75) == pytest.approx(0.3)  # midway through (0.2, 0.4]
    assert promtext.quantile(found, "demo_seconds", 0.25) == pytest.approx(0.05)


def test_quantile_beyond_the_last_bucket_and_with_no_data():
    assert promtext.quantile(_exposition([5.0] * 10), "demo_seconds", 0.99) == pytest.approx(0.8)
    assert promtext.quantile(_exposition([]), "demo_seconds", 0.5) is None
    assert promtext.quantile({}, "missing", 0.5) is None


def test_totals_and_label_sums():
    found = _exposition([0.1] * 9)
    assert promtext.total(found, "demo_requests_total") == 9
    assert promtext.by_label(found, "demo_requests_total", "tier") == {"large": 3, "small": 6}
    assert promtext.total(found, "demo_requests_total", tier="large") == 3


def test_failure_series_buckets_by_minute_within_the_window():
    now = 1_800_000_030.0  # 30 s into a minute
    start = now - 30
    samples = [{"tier": "small", "verdict": "fail", "time": str(start + 5)},
               {"tier": "small", "verdict": "pass", "time": str(start + 50)},
               {"tier": "small", "verdict": "pass", "time": str(start - 60)},
               {"tier": "large", "verdict": "fail", "time": str(start)},         # not a judged tier
               {"tier": "small", "verdict": "fail", "time": str(start - 3600)},  # older than the window
               {"tier": "small", "verdict": "fail"}]                             # no time: skipped
    series = failure_series(samples, ["small", "medium"], now)
    assert len(series["minutes"]) == 60 and series["minutes"][-1] == start
    assert series["failure_rate"]["small"][-2:] == [0.0, 0.5]
    assert series["samples"]["small"][-2:] == [1, 2] and sum(series["samples"]["small"]) == 3
    assert series["failure_rate"]["medium"] == [None] * 60


def test_similarity_histogram_clamps_to_its_bins():
    hist = similarity_histogram([{"similarity": "1.0"}, {"similarity": "0.95"}, {"similarity": "-0.2"},
                                 {"similarity": "0.31"}, {"similarity": ""}, {}])
    assert hist["counts"] == [1, 0, 0, 1, 0, 0, 0, 0, 0, 2] and len(hist["bin_edges"]) == 11


def test_basic_credentials_become_the_bearer_key():
    basic = lambda text: "Basic " + base64.b64encode(text.encode()).decode()  # noqa: E731
    assert as_bearer(basic("admin:sk-1:with-colon")) == "Bearer sk-1:with-colon"
    assert as_bearer(basic("anyone:")) is None
    assert as_bearer("Basic not base64!") is None
    assert as_bearer("Bearer sk-2") == "Bearer sk-2" and as_bearer(None) is None
