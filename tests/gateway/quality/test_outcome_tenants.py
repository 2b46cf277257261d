"""Outcomes carry their tenant into the learner, whose nearest-outcome memory is per tenant unless
the operator shares it (quality.outcome_memory); an upload names its tenant or is the operator's."""
from __future__ import annotations

import json

import numpy as np
import pytest

from classifier.outcome_model import known_levels
from gateway.config import parse_config
from gateway.core.classify import OnnxComplexityClassifier
from gateway.quality.learning import Entry, fit_entries
from tests.gateway.quality.quality_helpers import two_tier_config

KIND = [f"What is the sales tax in {s}?" for s in ("Ohio", "Texas", "Utah", "Maine", "Iowa", "Idaho", "Oregon",
                                                    "Nevada", "Kansas", "Alaska", "Georgia", "Vermont")]
EASY = ["Say hello.", "Hi there!", "Name a fruit.", "What color is the sky?", "Tell me a joke.", "Thanks, bye!"]
PROBE = [{"role": "user", "content": "What is the sales tax in Virginia?"}]


@pytest.fixture(scope="module")
def shipped():
    from classifier.runtime import ComplexityClassifier

    return ComplexityClassifier.load()


def _entries(shipped, tenant: str) -> list[Entry]:
    from classifier.features import extract

    out = []
    for text in KIND + EASY:
        _, numeric = extract(None, text)
        probs = shipped.probabilities([text], numeric[None, :])[0]
        passed = {1: False, 4: True} if text in KIND else {1: True, 4: True}
        out.append(Entry(numeric, probs, known_levels(passed), False, tenant))
    return out


def _config(mode: str):
    return parse_config(two_tier_config("http://127.0.0.1:9", "http://127.0.0.1:9", "tgtest:unused:",
                                        {"outcome_memory": mode}))


def test_a_tenants_verdicts_decide_its_own_requests_only_unless_shared(shipped):
    in_play = np.array([1, 4])
    own = OnnxComplexityClassifier(shipped.with_outcomes(fit_entries(_entries(shipped, "a"), in_play,
                                                                     _config("tenant"))))
    a, b = own.classify(PROBE, None, "a"), own.classify(PROBE, None, "b")
    assert a.evidence[0] > 0 and b.evidence[0] == 0 and a.need[0] > b.need[0]
    shared = OnnxComplexityClassifier(shipped.with_outcomes(fit_entries(_entries(shipped, "a"), in_play,
                                                                        _config("shared"))))
    assert shared.classify(PROBE, None, "b").evidence[0] > 0


def test_an_entry_keeps_its_tenant_through_the_stream(shipped):
    entry = _entries(shipped, "team-a")[0]
    again = Entry.parse({k: str(v) for k, v in entry.fields().items()})
    assert again.tenant == "team-a" and again.known.tolist() == entry.known.tolist()
    older = {k: str(v) for k, v in entry.fields().items() if k != "t"}  # written before outcomes had a tenant
    assert Entry.parse(older).tenant == ""


def test_an_invalid_outcome_memory_setting_is_rejected_by_name():
    from gateway.config import ConfigError

    with pytest.raises(ConfigError, match="outcome_memory"):
        _config("everyone")


async def test_an_upload_names_a_known_tenant_or_is_refused(fakes, gateway, redis_prefix, http):
    (_, small_url), (_, top_url) = await fakes(2)
    gw = await gateway(two_tier_config(small_url, top_url, redis_prefix, {"min_heldout": 1000}))
    line = json.dumps({"prompt": "What is the sales tax in Ohio?", "outcomes": {"1": False, "4": True}}) + "\n"
    async with http.post(gw.url + "/admin/router/outcomes?tenant=nobody", data=line) as r:
        assert r.status == 404 and (await r.json())["error"]["param"] == "tenant"
    async with http.post(gw.url + "/admin/router/outcomes?tenant=anonymous&heldout_share=0", data=line) as r:
        assert r.status == 200, await r.text()
    stored = await gw.state.redis.xrange(redis_prefix + "quality:outcomes")
    assert [Entry.parse(fields).tenant for _, fields in stored] == ["anonymous"]
