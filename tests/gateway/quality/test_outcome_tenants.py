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


async def test_through_the_gateway_only_the_uploading_tenants_requests_read_its_outcomes(fakes, gateway, redis_prefix,
                                                                                          http):
    from policies.keys import hash_key

    (_, small_url), (_, top_url) = await fakes(2)
    keys = {"alpha": "sk-alpha-outcomes-key", "beta": "sk-beta-outcomes-key", "admin": "sk-admin-outcomes-key"}
    doc = two_tier_config(small_url, top_url, redis_prefix, {"sampling_rate": 0.0, "learn_every": 8,
                                                             "heldout_share": 0.25, "min_heldout": 2})
    doc["tenants"] = {name: {"keys": [{"id": "k", "sha256": hash_key(keys[name])}]} for name in ("alpha", "beta")}
    doc["policy"] = {"admin_key_sha256": hash_key(keys["admin"])}
    gw = await gateway(doc)
    states = ["Ohio", "Texas", "Utah", "Maine", "Iowa", "Idaho", "Oregon", "Nevada", "Kansas", "Alaska", "Georgia",
              "Vermont", "Florida", "Montana", "Arizona", "Indiana", "Alabama", "Wyoming", "Kentucky", "Colorado"]
    lines = [{"prompt": f"What is the sales tax in {s}?", "outcomes": {"1": False, "4": True}} for s in states] + \
            [{"prompt": c, "outcomes": {"1": True, "4": True}} for c in EASY * 2]
    admin = {"Authorization": f"Bearer {keys['admin']}"}
    async with http.post(gw.url + "/admin/router/outcomes?tenant=alpha", headers=admin,
                         data="".join(json.dumps(line) + "\n" for line in lines)) as r:
        assert r.status == 200, await r.text()
        answer = await r.json()
    assert answer["router"]["swapped"] >= 1, answer["decisions"]

    async def route(tenant: str) -> dict:
        async with http.post(gw.url + "/v1/route", json={"model": "auto", "messages": PROBE},
                             headers={"Authorization": f"Bearer {keys[tenant]}"}) as r:
            assert r.status == 200, await r.text()
            return await r.json()
    alpha, beta = await route("alpha"), await route("beta")
    assert alpha["classifier"]["evidence"]["1"] > 0 and beta["classifier"]["evidence"]["1"] == 0
    assert alpha["quality"]["expected_gain_by_level"]["1"] > beta["quality"]["expected_gain_by_level"]["1"]
    assert "sales tax in Ohio" not in json.dumps(alpha)
