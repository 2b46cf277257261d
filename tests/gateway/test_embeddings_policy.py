"""Embeddings obey the tenant's allowed_tiers and allowed_models like chat: a tier or model
outside them is a 403 naming the field; allowed_tiers may list embeddings tiers. Workers are
played by the scripted transport."""
from __future__ import annotations

import aiohttp
import pytest

from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support.scripted_transport import ScriptedTransport, worker

KEYS = {"chat-only": "sk-emb-chat-only", "with-vectors": "sk-emb-with-vectors", "other-model": "sk-emb-other-model"}
POLICIES = {"chat-only": {"allowed_tiers": ["small"]}, "with-vectors": {"allowed_tiers": ["small", "vectors"]},
            "other-model": {"allowed_models": ["model-small"]}}


@pytest.fixture
async def embeddings_gw(gateway, redis_prefix):
    tenants = {name: {"keys": [{"id": "k", "sha256": hash_key(KEYS[name])}], **POLICIES[name]} for name in KEYS}
    doc = base_config([tier("small", 1, ["http://chat.test"])], redis_prefix, tenants=tenants,
                      embeddings=[tier("vectors", 1, ["http://vectors.test"])])
    return (await gateway(doc, transport=ScriptedTransport(worker))).url


async def _embed(url: str, tenant: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http, http.post(
            url + "/v1/embeddings", json={"model": "vectors", "input": ["a", "b"]},
            headers={"Authorization": f"Bearer {KEYS[tenant]}"}) as response:
        return response.status, await response.json()


@pytest.mark.parametrize("tenant,field", [("chat-only", "allowed_tiers"), ("other-model", "allowed_models")])
async def test_a_tier_or_model_outside_the_policy_is_a_403_naming_the_field(embeddings_gw, tenant, field):
    status, body = await _embed(embeddings_gw, tenant)
    assert status == 403 and body["error"]["code"] == "model_not_allowed"
    assert f"({field})" in body["error"]["message"] and body["error"]["param"] == "model"


async def test_an_embeddings_tier_listed_in_allowed_tiers_serves(embeddings_gw):
    status, body = await _embed(embeddings_gw, "with-vectors")
    assert status == 200 and len(body["data"]) == 2
