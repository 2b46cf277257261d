"""Failover escalation stays inside the request's policy: a tier the tenant may not use, or one
that cannot serve the request, is never tried; when none it may use is up the answer is a 503
naming that, and an allowed escalation still happens."""
from __future__ import annotations

import openai
import pytest

from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support import free_port

HI = [{"role": "user", "content": "hi"}]
FORMAT = {"type": "json_object"}
KEYS = {"medium-only": "sk-medium-only-climb-key", "wide": "sk-wide-climb-key"}


@pytest.fixture
async def medium_down(fakes, gateway, redis_prefix, tmp_path):
    """small, medium (its only worker refuses connections) and large; medium alone states
    structured outputs."""
    (small, s_url), (large, l_url) = await fakes(2)
    tenants = {"medium-only": {"keys": [{"id": "k", "sha256": hash_key(KEYS["medium-only"])}],
                               "allowed_tiers": ["medium"]},
               "wide": {"keys": [{"id": "k", "sha256": hash_key(KEYS["wide"])}],
                        "allowed_tiers": ["medium", "large"]}}
    medium = {**tier("medium", 2, [f"http://127.0.0.1:{free_port()}"]), "capabilities": {"structured_outputs": True}}
    doc = base_config([tier("small", 1, [s_url]), medium, tier("large", 3, [l_url])], redis_prefix,
                      tenants=tenants, policy={"usage_log": {"dir": str(tmp_path / "usage")}})
    return await gateway(doc), small, large


def _client(gw, tenant: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=KEYS[tenant], max_retries=0, timeout=10)


async def _refused(client: openai.AsyncOpenAI, **asked) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as err:
        await client.chat.completions.create(messages=HI, **asked)
    return err.value


async def test_a_tenant_whose_only_allowed_tier_is_down_gets_503_and_no_other_tier_is_asked(medium_down):
    gw, small, large = medium_down
    async with _client(gw, "medium-only") as client:
        for model in ("medium", "auto"):
            err = await _refused(client, model=model)
            assert err.status_code == 503 and err.body["code"] == "no_allowed_tier_available", err.body
            assert "no allowed tier" in err.body["message"] and "(medium)" in err.body["message"]
            assert int(err.response.headers["Retry-After"]) >= 1
    assert len(large.seen) == 0 and len(small.seen) == 0


async def test_escalation_skips_a_tier_that_cannot_serve_the_request(medium_down):
    gw, small, large = medium_down
    async with _client(gw, "wide") as client:  # large is allowed, but states no structured outputs
        err = await _refused(client, model="medium", response_format=FORMAT)
    assert err.status_code == 503 and err.body["code"] == "no_allowed_tier_available", err.body
    assert len(large.seen) == 0


async def test_an_allowed_escalation_still_happens(medium_down):
    gw, small, large = medium_down
    async with _client(gw, "wide") as client:
        raw = await client.chat.completions.with_raw_response.create(model="medium", messages=HI)
    assert raw.status_code == 200 and raw.headers["x-tiergate-tier"] == "large"
    assert large.served == 1 and len(small.seen) == 0
