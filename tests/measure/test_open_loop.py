"""The open-loop load generator against an in-process gateway over fake upstreams: per-tier
figures come from the gateway's answers, errors are counted (not raised), and the SLO check works."""
from __future__ import annotations

import pytest

from measure.open_loop import meets_slo, run_at
from gateway.core.classify import PromptLengthClassifier
from tests.support import SHARED_REDIS


@pytest.fixture
def default_classifier():
    return PromptLengthClassifier()


def tier(name, level, url):
    return {"name": name, "level": level, "model": f"m-{name}", "price_per_mtok": {"input": 1.0, "output": 2.0},
            "workers": [{"url": url}]}


async def test_run_at_reports_per_tier_figures_and_errors(fakes, gateway, redis_prefix):
    (small, small_url), (large, large_url) = await fakes(2, chunks=6)
    large.fail_status = 500  # every large request fails: must show up as errors, not crash the run
    gw = await gateway({"tiers": [tier("small", 1, small_url), tier("large", 2, large_url)],
                        "redis": {"url": SHARED_REDIS, "key_prefix": redis_prefix},
                        "failover": {"max_attempts": 1, "escalate": False}})
    report = await run_at(gw.url, rate=40, duration_s=1.0, models=["small", "large"], keys=[None],
                          stream_share=0.5, max_in_flight=64, seed=3)
    s, lg = report["tiers"]["small"], report["tiers"]["large"]
    assert report["requests"] == s["requests"] + lg["requests"] > 10
    assert s["ok"] == s["requests"] == small.served and s["errors"] == {}
    assert lg["ok"] == 0 and sum(lg["errors"].values()) == lg["requests"] == report["errors"]
    assert s["ttft_s"]["p50"] <= s["ttft_s"]["p99"] <= s["e2e_s"]["p99"]
    assert s["tpot_s"]["p50"] is not None and s["output_tokens_per_s"] > 0  # streamed ones have 6 tokens
    assert s["p99_p50_ratio"]["e2e"] >= 1 and s["health"] in ("healthy", "watch", "contended")
    assert not meets_slo(report, slo_ttft_s=10.0)  # too many errors, however fast
    report["errors"] = 0
    assert meets_slo(report, slo_ttft_s=10.0) and not meets_slo(report, slo_ttft_s=1e-6)
