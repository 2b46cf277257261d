"""The semantic cache on the request path, in process against a scripted upstream and the
shared Redis: off unless the tenant turns it on, a paraphrase is served a similar prompt's
answer and a near duplicate with another number or name is not, tenants never share entries,
the index is bounded, invalidation (the admin call, another process's clear, a new model
identity) leaves nothing to serve, a stream is replayed like an exact hit, and a semantic hit
is marked and billed at the cache's price."""
from __future__ import annotations

import glob
import json
from dataclasses import replace

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from gateway.api.handlers import serve
from gateway.cache import admin
from gateway.cache.identity import tier_identities
from gateway.config import parse_config
from gateway.core.relay import Delivery
from gateway.core.services import SERVICES
from policies.keys import hash_key
from policies.usage_log import read_records
from tests.gateway.cache.cache_helpers import KEYS, ask, cache_config, cached_services, numbered_upstream, text
from tests.support.in_process import chat_call, services_for
from tests.support.scripted_transport import Reply, ScriptedTransport, sse
from typedconfig import ConfigError

ON = {"cache": {"semantic": {"enabled": True}}}
ASKED = "What is the population of Peru?"
REWORDED = "Hi! Quick question. What's the population of Peru?"


def said(content: str) -> dict:
    return {"messages": [{"role": "user", "content": content}]}


def semantic_services(prefix: str, upstream, tenants: dict | None = None, **policy):
    return cached_services(prefix, upstream, tenants={"acme": ON, "globex": ON, **(tenants or {})}, **policy)


async def test_a_paraphrase_is_served_the_cached_answer_and_marked_semantic(redis_prefix):
    upstream = numbered_upstream()
    services = semantic_services(redis_prefix, upstream)
    first, status = await ask(services, **said(ASKED))
    assert status == "miss" and text(first) == "answer 1"
    again, status = await ask(services, **said(REWORDED))
    assert status == "semantic" and text(again) == "answer 1" and len(upstream.sent) == 1
    assert again["id"] != first["id"] and again["usage"] == first["usage"]


@pytest.mark.parametrize("near", ["What is the population of Chile?", "What is the population of Peru in 1990?",
                                  "What is the population of Peru not counting Lima?",
                                  "Where is the population of Peru?"])
async def test_a_near_duplicate_with_another_name_number_or_negation_is_not_served(redis_prefix, near):
    upstream = numbered_upstream()
    services = semantic_services(redis_prefix, upstream)
    await ask(services, **said(ASKED))
    answer, status = await ask(services, **said(near))
    assert status == "miss" and text(answer) == "answer 2"


async def test_a_long_prompt_that_differs_only_in_the_middle_is_not_served(redis_prefix):
    upstream = numbered_upstream()
    services = semantic_services(redis_prefix, upstream)
    filler = " ".join(["The review covered staffing, tooling and the release calendar of the team."] * 30)
    ask_at_end = "\n\nWho owned the incidents, according to the report?"
    await ask(services, **said(f"{filler} The incident owner was Ada. {filler}{ask_at_end}"))
    answer, status = await ask(services, **said(f"{filler} The incident owner was Ivo. {filler}{ask_at_end}"))
    assert status == "miss" and text(answer) == "answer 2"
    assert (await ask(services, **said(f"{filler} The incident owner was Ivo. {filler}\n\nPlease tell me: "
                                       "who owned the incidents, according to the report?")))[1] == "semantic"


async def test_off_by_default_and_never_across_tenants(redis_prefix):
    upstream = numbered_upstream()
    services = semantic_services(redis_prefix, upstream)
    await ask(services, "acme", **said(ASKED))
    assert (await ask(services, "globex", **said(REWORDED)))[1] == "miss"  # globex has it on, but not acme's entries
    assert (await ask(services, "initech", **said(ASKED)))[1] == "miss"
    assert (await ask(services, "initech", **said(REWORDED)))[1] == "miss"  # initech never turned it on
    assert (await ask(services, "acme", **said(REWORDED)))[1] == "semantic"
    assert text((await ask(services, "globex", **said(ASKED)))[0]) == "answer 2"  # its own, by its reword


async def test_a_shared_cache_shares_semantic_hits_only_among_its_members(redis_prefix):
    upstream = numbered_upstream()
    services = semantic_services(redis_prefix, upstream, cache={"shared": {"org": ["acme", "globex"]}},
                                 tenants={"initech": ON})
    await ask(services, "acme", **said(ASKED))
    answer, status = await ask(services, "globex", **said(REWORDED))
    assert status == "semantic" and text(answer) == "answer 1"
    assert (await ask(services, "initech", **said(REWORDED)))[1] == "miss"


async def test_the_index_is_bounded_per_tenant(redis_prefix):
    upstream = numbered_upstream()
    services = semantic_services(redis_prefix, upstream, tenants={"acme": {"cache": {"semantic": {
        "enabled": True, "max_entries": 2}}}})
    for country in ("Peru", "Chile", "Kenya"):
        await ask(services, **said(f"What is the population of {country}?"))
    assert services.cache.semantic.index.used("t:acme")[0] == 2
    assert (await ask(services, **said("Please tell me the population of Peru.")))[1] == "miss"  # the oldest went
    assert (await ask(services, **said("Please tell me the population of Kenya.")))[1] == "semantic"


async def test_invalidation_and_a_new_model_identity_leave_nothing_to_serve(redis_prefix):
    upstream = numbered_upstream()
    services = semantic_services(redis_prefix, upstream)
    await ask(services, **said(ASKED))
    await services.cache.store.clear(redis_prefix, "t:acme")  # another process's admin call: the answers are gone
    assert (await ask(services, **said(REWORDED)))[1] == "miss"
    assert (await ask(services, **said("Please: " + ASKED)))[1] == "semantic"  # the fresh answer is indexed
    pools = services.upstreams.pools
    for backend in pools.by_tier["small"].backends:
        backend.identity = "new-weights"
    services = replace(services, cache=replace(services.cache, identities=tier_identities(services.config, pools)))
    assert (await ask(services, **said(REWORDED)))[1] == "miss"


async def test_a_semantic_hit_is_billed_at_the_cache_price_and_marked_in_the_usage_log(redis_prefix, tmp_path):
    doc = cache_config(redis_prefix, tenants={"acme": {"cache": {"semantic": {"enabled": True},
                                                                 "price_per_mtok": {"input": 1.0, "output": 0.0}}}})
    doc["policy"] = {"usage_log": {"dir": str(tmp_path), "fsync": "always"}}
    services = services_for(doc, numbered_upstream())
    await ask(services, **said(ASKED))
    await ask(services, **said(REWORDED))
    fresh, hit = read_records(glob.glob(str(tmp_path / "*.jsonl")))
    assert (fresh.usage_source, fresh.cost_micro) == ("worker", 13)
    assert (hit.usage_source, hit.tier, hit.prompt_tokens, hit.completion_tokens) == ("semantic_cache", "small", 7, 3)
    assert hit.cost_micro == 7  # 7 x $1 per Mtok, the output free


async def test_a_stream_is_replayed_for_a_semantic_hit_like_an_exact_one(redis_prefix):
    chunks = sse({"id": "w", "object": "chat.completion.chunk", "created": 1,
                  "choices": [{"index": 0, "delta": {"content": "Lima has many"}, "finish_reason": None}]},
                 {"id": "w", "object": "chat.completion.chunk", "created": 1,
                  "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                 {"id": "w", "object": "chat.completion.chunk", "created": 1, "choices": [],
                  "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}, "[DONE]")
    upstream = ScriptedTransport(lambda sent: Reply(body=chunks[0], chunks=chunks[1:],
                                                    headers={"Content-Type": "text/event-stream"}))
    services = semantic_services(redis_prefix, upstream)

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        call = chat_call(services, KEYS["acme"], **body)
        return await serve(services, call, Delivery(request))

    app = web.Application()
    app.router.add_post("/", handler)
    async with TestClient(TestServer(app)) as client:
        answers = []
        for content in (ASKED, REWORDED):
            response = await client.post("/", json={"model": "small", "temperature": 0, "stream": True,
                                                    "stream_options": {"include_usage": True}, **said(content)})
            answers.append((response.headers.get("x-tiergate-cache"), await response.text()))
            await services.cache.writes.drain()
    (first_status, first), (status, replayed) = answers
    assert (first_status, status, len(upstream.sent)) == ("miss", "semantic", 1)
    events = [json.loads(line[6:]) for line in replayed.splitlines() if line.startswith("data: {")]
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"]) == "Lima has many"
    assert events[-1]["usage"]["completion_tokens"] == 3 and replayed.rstrip().endswith("data: [DONE]")
    assert len({e["id"] for e in events}) == 1 and events[0]["id"] not in first


def test_an_unknown_semantic_setting_is_refused_by_name():
    with pytest.raises(ConfigError) as refused:
        parse_config(cache_config("p:", tenants={"acme": {"cache": {"semantic": {"enabled": True, "treshold": 0.9}}}}))
    assert "cache.semantic.treshold" in str(refused.value)


async def test_the_admin_clear_empties_this_processs_index_for_what_it_names(redis_prefix):
    doc = cache_config(redis_prefix, tenants={"acme": ON, "globex": ON})
    doc["policy"] = {"admin_key_sha256": hash_key("sk-semantic-admin")}
    services = services_for(doc, numbered_upstream())
    await ask(services, "acme", **said(ASKED))
    await ask(services, "globex", **said(ASKED))

    @web.middleware
    async def snapshot(request, handler):
        request[SERVICES] = services
        return await handler(request)

    app = web.Application(middlewares=[snapshot])
    admin.add_routes(app)
    async with TestClient(TestServer(app)) as client:
        cleared = await client.post("/admin/cache/clear", json={"tenant": "acme"},
                                    headers={"Authorization": "Bearer sk-semantic-admin"})
        assert cleared.status == 200 and (await cleared.json())["cleared"] == 1
    index = services.cache.semantic.index
    assert index.used("t:acme")[0] == 0 and index.used("t:globex")[0] == 1
    assert (await ask(services, "acme", **said(REWORDED)))[1] == "miss"
    assert (await ask(services, "globex", **said(REWORDED)))[1] == "semantic"
