"""The exact response cache on the request path, in process against a scripted upstream and the
shared Redis: identical deterministic requests hit, every field that changes the answer misses,
tenants never see each other's entries (unless they share a cache), the quota bounds a cache,
no-store keeps nothing, the controls are checked by name, and a hit is billed at the cache's
price after the tenant's policy and rate limits."""
from __future__ import annotations

import glob
from dataclasses import replace

import pytest

from gateway.cache.identity import tier_identities
from policies.usage_log import read_records
from tests.gateway.cache.cache_helpers import ask, cache_config, cached_services, numbered_upstream, text
from tests.support.in_process import services_for
from wire.errors import OpenAIError

TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}


async def test_identical_deterministic_requests_hit_with_the_same_answer_and_a_fresh_id(redis_prefix):
    upstream = numbered_upstream()
    services = cached_services(redis_prefix, upstream)
    first, status = await ask(services)
    assert status == "miss" and text(first) == "answer 1"
    again, status = await ask(services)
    assert status == "hit" and len(upstream.sent) == 1
    assert text(again) == "answer 1" and again["usage"] == first["usage"]
    assert again["id"] != first["id"] and again["id"].startswith("chatcmpl-")
    third, _ = await ask(services)
    assert third["id"] not in (first["id"], again["id"])
    seeded, status = await ask(services, temperature=0.9, seed=7)  # a seed makes a request deterministic too
    assert status == "miss"
    assert (await ask(services, temperature=0.9, seed=7))[1] == "hit"


@pytest.mark.parametrize("change", [
    {"messages": [{"role": "user", "content": "hi!"}]},
    {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]},
    {"model": "large"},
    {"seed": 1},
    {"top_p": 0.5},
    {"max_tokens": 17},
    {"stop": ["\n"]},
    {"n": 2},
    {"logprobs": True},
    {"tools": [TOOL]},
    {"response_format": {"type": "json_object"}},
    {"presence_penalty": 0.5},
    {"logit_bias": {"42": 5}},
], ids=lambda change: next(iter(change)))
async def test_any_field_that_changes_the_answer_misses(redis_prefix, change):
    upstream = numbered_upstream()
    services = cached_services(redis_prefix, upstream, structured_escalation=False)  # the text answer stands
    services = replace(services, router=replace(services.router, capabilities={
        name: replace(cap, tools=True, structured_outputs=True, logprobs=True, n=True)
        for name, cap in services.router.capabilities.items()}))
    await ask(services)
    changed, status = await ask(services, **change)
    assert status == "miss" and text(changed) == "answer 2"
    assert (await ask(services, **change))[1] == "hit"  # and the changed request is cached on its own


async def test_what_only_shapes_delivery_still_hits(redis_prefix):
    upstream = numbered_upstream()
    services = cached_services(redis_prefix, upstream)
    await ask(services, user="someone")
    assert (await ask(services, user="someone else"))[1] == "hit"
    assert (await ask(services, max_tokens=256))[1] == "hit"  # the default, written out


async def test_a_sampled_request_bypasses_unless_it_asks(redis_prefix):
    upstream = numbered_upstream()
    services = cached_services(redis_prefix, upstream)
    assert (await ask(services, temperature=0.7))[1] == "bypass"
    assert (await ask(services, temperature=0.7))[1] == "bypass" and len(upstream.sent) == 2
    assert (await ask(services, temperature=0.7, cache={"mode": "exact"}))[1] == "miss"
    answer, status = await ask(services, temperature=0.7, headers={"x-tiergate-cache-mode": "exact"})
    assert status == "hit" and text(answer) == "answer 3"


async def test_tenant_modes_requested_and_off(redis_prefix):
    upstream = numbered_upstream()
    services = cached_services(redis_prefix, upstream, tenants={"acme": {"cache": {"mode": "requested"}},
                                                                "globex": {"cache": {"mode": "off"}}})
    await ask(services)
    assert (await ask(services))[1] == "bypass"  # temperature 0 alone is not asking
    await ask(services, cache={"mode": "exact"})
    assert (await ask(services, cache={"mode": "exact"}))[1] == "hit"
    assert (await ask(services, "globex"))[1] == "bypass"
    with pytest.raises(OpenAIError) as refused:
        await ask(services, "globex", cache={"mode": "exact"})
    assert (refused.value.status, refused.value.param, refused.value.code) == (400, "cache.mode", "cache_unavailable")


async def test_entries_of_one_tenant_are_never_served_to_another(redis_prefix):
    upstream = numbered_upstream()
    services = cached_services(redis_prefix, upstream)
    await ask(services, "acme")
    answer, status = await ask(services, "globex")
    assert status == "miss" and text(answer) == "answer 2"
    assert text((await ask(services, "globex"))[0]) == "answer 2"
    assert text((await ask(services, "acme"))[0]) == "answer 1"


async def test_a_shared_cache_serves_its_members_and_no_one_else(redis_prefix):
    upstream = numbered_upstream()
    services = cached_services(redis_prefix, upstream, cache={"shared": {"org": ["acme", "globex"]}})
    await ask(services, "acme")
    answer, status = await ask(services, "globex")
    assert status == "hit" and text(answer) == "answer 1"
    assert (await ask(services, "initech"))[1] == "miss"


async def test_a_hit_still_passes_the_tenants_policy_and_rate_limits(redis_prefix):
    upstream = numbered_upstream()
    services = cached_services(redis_prefix, upstream, cache={"shared": {"org": ["acme", "globex"]}},
                               tenants={"globex": {"allowed_tiers": ["small"]},
                                        "initech": {"rate_limits": {"requests_per_minute": 2}}})
    await ask(services, "acme", model="large")
    with pytest.raises(OpenAIError) as refused:
        await ask(services, "globex", model="large")  # in the shared cache, but not a tier globex may use
    assert refused.value.status == 403
    await ask(services, "initech")
    assert (await ask(services, "initech"))[1] == "hit"
    with pytest.raises(OpenAIError) as limited:
        await ask(services, "initech")
    assert limited.value.status == 429 and limited.value.code == "rate_limit_exceeded"


async def test_no_store_keeps_nothing_and_no_cache_reads_nothing(redis_prefix):
    upstream = numbered_upstream()
    services = cached_services(redis_prefix, upstream)
    assert (await ask(services, headers={"Cache-Control": "no-store"}))[1] == "miss"
    assert (await ask(services, cache={"no_store": True}))[1] == "miss"
    assert await services.cache.store.used(redis_prefix, "t:acme") == (0, 0)
    await ask(services)
    fresh, status = await ask(services, headers={"Cache-Control": "no-cache"})
    assert status == "bypass" and text(fresh) == "answer 4"
    assert text((await ask(services))[0]) == "answer 4"  # the fresh answer replaced the old one
    assert (await ask(services, headers={"Cache-Control": "max-age=3600"}))[1] == "hit"


@pytest.mark.parametrize("headers, body, param", [
    ({"x-tiergate-cache-mode": "sometimes"}, {}, "x-tiergate-cache-mode"),
    ({"Cache-Control": "only-if-cached"}, {}, "Cache-Control"),
    ({"Cache-Control": "max-age=soon"}, {}, "Cache-Control: max-age"),
    ({}, {"cache": "exact"}, "cache"),
    ({}, {"cache": {"mode": "fuzzy"}}, "cache.mode"),
    ({}, {"cache": {"ttl_s": 0}}, "cache.ttl_s"),
    ({}, {"cache": {"ttl_s": 10**9}}, "cache.ttl_s"),
    ({}, {"cache": {"no_store": "yes"}}, "cache.no_store"),
    ({}, {"cache": {"semantic": True}}, "cache.semantic"),
])
async def test_bad_controls_are_a_400_naming_them(redis_prefix, headers, body, param):
    upstream = numbered_upstream()
    services = cached_services(redis_prefix, upstream)
    with pytest.raises(OpenAIError) as refused:
        await ask(services, headers=headers, **body)
    assert (refused.value.status, refused.value.param) == (400, param)
    assert upstream.sent == []


async def test_asking_a_gateway_without_the_cache_is_a_400(redis_prefix):
    doc = cache_config(redis_prefix, cache={"enabled": False})
    services = services_for(doc, numbered_upstream())
    assert (await ask(services))[1] is None  # no cache: no header
    with pytest.raises(OpenAIError) as refused:
        await ask(services, cache={"mode": "exact"})
    assert (refused.value.status, refused.value.param) == (400, "cache.mode")


async def test_the_quota_bounds_the_cache_evicting_the_least_recently_used(redis_prefix):
    upstream = numbered_upstream()
    quota = 2048  # about five entries of this size
    services = cached_services(redis_prefix, upstream, storage={"cache_bytes": quota})
    for i in range(4):
        await ask(services, messages=[{"role": "user", "content": f"question {i}"}])
    assert (await ask(services, messages=[{"role": "user", "content": "question 0"}]))[1] == "hit"  # now recent
    for i in range(4, 12):
        await ask(services, messages=[{"role": "user", "content": f"question {i}"}])
        entries, used = await services.cache.store.used(redis_prefix, "t:acme")
        assert used <= quota
    assert entries < 12
    assert (await ask(services, messages=[{"role": "user", "content": "question 1"}]))[1] == "miss"  # evicted
    assert (await ask(services, messages=[{"role": "user", "content": "question 11"}]))[1] == "hit"


async def test_a_hit_is_billed_at_the_cache_price_and_marked_in_the_usage_log(redis_prefix, tmp_path):
    doc = cache_config(redis_prefix, tenants={"acme": {"cache": {"price_per_mtok": {"input": 1.0, "output": 0.0}}}})
    doc["policy"] = {"usage_log": {"dir": str(tmp_path), "fsync": "always"}}
    services = services_for(doc, numbered_upstream())
    await ask(services)
    await ask(services)
    records = read_records(glob.glob(str(tmp_path / "*.jsonl")))
    fresh, hit = records
    assert (fresh.usage_source, fresh.tier, fresh.cost_micro) == ("worker", "small", 13)  # 7 x $1 + 3 x $2 per Mtok
    assert (hit.usage_source, hit.tier, hit.prompt_tokens, hit.completion_tokens) == ("cache", "small", 7, 3)
    assert hit.cost_micro == 7 and hit.request_id != fresh.request_id  # 7 x $1 per Mtok, the output free


async def test_a_new_model_identity_never_serves_the_old_answers(redis_prefix):
    upstream = numbered_upstream()
    services = cached_services(redis_prefix, upstream)
    await ask(services)
    await ask(services, model="large")
    pools = services.upstreams.pools
    for backend in pools.by_tier["small"].backends:
        backend.identity = "new-weights"  # what the worker's card states after a restart
    services = replace(services, cache=replace(services.cache, identities=tier_identities(services.config, pools)))
    answer, status = await ask(services)
    assert status == "miss" and text(answer) == "answer 3"
    assert (await ask(services, model="large"))[1] == "hit"  # the other tier's model did not change


async def test_a_new_config_version_of_a_tier_never_serves_its_old_answers(redis_prefix):
    upstream = numbered_upstream()
    doc = cache_config(redis_prefix)
    await ask(services_for(doc, upstream))
    await ask(services_for(doc, upstream), model="large")
    doc["tiers"][0]["model_version"] = "2026-12-01"
    services = services_for(doc, upstream)
    assert (await ask(services))[1] == "miss"
    assert (await ask(services, model="large"))[1] == "hit"
