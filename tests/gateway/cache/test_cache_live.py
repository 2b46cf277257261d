"""The exact response cache end to end: the session's smollm2 worker behind one gateway process
with the cache on, the real `openai` SDK as the client. A repeated request is a hit with the
same content and usage under a fresh id, whole and streamed; the worker states its model
identity; the admin call empties what it names and nothing else; a hit is billed in the usage
log as `cache`."""
from __future__ import annotations

import glob
import json

import anthropic
import openai
import pytest

from policies.keys import hash_key
from policies.usage_log import read_records
from tests.gateway.e2e_stack import MODEL
from tests.support import Pending, wait_until
from tests.support.stack import Stack
from wire.model_identity import IDENTITY_HEADER, identity_digest

KEYS = {"alpha": "sk-cache-live-alpha", "beta": "sk-cache-live-beta"}
ADMIN = "sk-cache-live-admin"
QUESTION = [{"role": "user", "content": "Name one colour of the rainbow."}]


@pytest.fixture(scope="module")
def stack(tmp_path_factory, shared_worker):
    tmp = tmp_path_factory.mktemp("cache-live")
    doc = {"tiers": [{"name": "small", "level": 1, "model": MODEL, "price_per_mtok": {"input": 0.1, "output": 0.2},
                      "workers": [{"url": shared_worker}]},
                     {"name": "other", "level": 2, "model": MODEL, "price_per_mtok": {"input": 1, "output": 2},
                      "workers": [{"url": shared_worker}]}],
           "health": {"interval_s": 0.5, "timeout_s": 1.0}, "timeouts": {"connect_s": 1.0, "read_s": 60.0},
           "cache": {"enabled": True},
           "policy": {"usage_log": {"dir": str(tmp / "usage"), "fsync": "always"},
                      "admin_key_sha256": hash_key(ADMIN)},
           "tenants": {name: {"keys": [{"id": "main", "sha256": hash_key(key)}]} for name, key in KEYS.items()}}
    with Stack(tmp, "cache") as running:
        running.start_gateways(doc, supervised=True)
        running.worker = shared_worker
        yield running


def _client(stack, tenant: str = "alpha") -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.url + "/v1", api_key=KEYS[tenant], max_retries=0, timeout=120)


def _admin(stack, method: str, path: str, body: dict | None = None):
    return stack.request(method, path, json.dumps(body).encode() if body is not None else None,
                         {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"})


def _entries(stack, tenant: str) -> int:
    return _admin(stack, "GET", f"/admin/cache?tenant={tenant}").json()["caches"][f"t:{tenant}"]["entries"]


def _kept(stack, tenant: str, at_least: int) -> int:
    """Wait for the answer's background write: the tenant's cache holds `at_least` entries."""
    def enough():
        entries = _entries(stack, tenant)
        return entries if entries >= at_least else Pending(entries)
    return wait_until(enough, 10, what=f"{at_least} cache entries of {tenant}")


def _ask(stack, tenant: str = "alpha", model: str = "small", **extra):
    raw = _client(stack, tenant).chat.completions.with_raw_response.create(
        model=model, messages=QUESTION, temperature=0, max_tokens=12, **extra)
    return raw.parse(), raw.headers


def test_the_worker_states_its_model_identity(stack):
    card = json.loads(stack.request("GET", "/v1/models", url=stack.worker).body)
    identity = card["data"][0]["identity"]
    assert identity["model"] == MODEL and len(identity["weights_sha256"]) == 64
    assert identity["settings"]["device"] == "cpu"
    answer = stack.request("POST", "/v1/chat/completions", json.dumps(
        {"model": MODEL, "messages": QUESTION, "max_tokens": 2}).encode(), {"Content-Type": "application/json"},
        url=stack.worker)
    assert answer.status == 200 and answer.headers[IDENTITY_HEADER] == identity_digest(identity)


def test_a_repeated_request_is_served_from_the_cache_with_a_fresh_id(stack):
    before = _entries(stack, "alpha")
    first, headers = _ask(stack, "alpha", "small", seed=11)
    assert headers["x-tiergate-cache"] == "miss"
    _kept(stack, "alpha", before + 1)
    again, headers = _ask(stack, "alpha", "small", seed=11)
    assert headers["x-tiergate-cache"] == "hit" and headers["x-tiergate-backend"] == "cache"
    assert again.choices[0].message.content == first.choices[0].message.content
    assert again.usage == first.usage and again.id != first.id
    _, headers = _ask(stack, "beta", "small", seed=11)
    assert headers["x-tiergate-cache"] == "miss"  # alpha's entry is alpha's


def test_a_stream_replays_the_same_content_and_usage_with_fresh_ids(stack):
    def streamed():
        chunks = list(_client(stack).chat.completions.create(
            model="small", messages=QUESTION, temperature=0, max_tokens=12, stream=True,
            stream_options={"include_usage": True}))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return text, chunks[-1].usage, {c.id for c in chunks}

    before = _entries(stack, "alpha")
    text, usage, ids = streamed()
    kept = _kept(stack, "alpha", before + 1)
    with _client(stack).chat.completions.with_streaming_response.create(
            model="small", messages=QUESTION, temperature=0, max_tokens=12, stream=True) as raw:
        assert raw.headers["x-tiergate-cache"] == "hit"
        replayed = [c for c in raw.parse()]
    assert "".join(c.choices[0].delta.content or "" for c in replayed if c.choices) == text
    assert all(c.usage is None for c in replayed)  # not asked for this time: the usage chunk is not sent
    again_text, again_usage, again_ids = streamed()
    assert (again_text, again_usage) == (text, usage) and usage.completion_tokens > 0
    assert len(again_ids) == 1 and again_ids.isdisjoint(ids) and {c.id for c in replayed}.isdisjoint(again_ids | ids)
    assert _entries(stack, "alpha") == kept


def test_a_hit_is_billed_as_cache_in_the_usage_log(stack):
    before = _entries(stack, "beta")
    _ask(stack, "beta", "other", seed=3)
    _kept(stack, "beta", before + 1)
    hit, headers = _ask(stack, "beta", "other", seed=3)
    assert headers["x-tiergate-cache"] == "hit"

    def billed():
        rows = [r for r in read_records(glob.glob(str(stack.tmp / "usage" / "*.jsonl")))
                if r.request_id == headers["x-request-id"]]
        return rows or Pending("no row yet")

    row, = wait_until(billed, 10, what="the hit's usage row")
    assert (row.usage_source, row.tier, row.cost_micro) == ("cache", "other", 0)
    assert (row.prompt_tokens, row.completion_tokens) == (hit.usage.prompt_tokens, hit.usage.completion_tokens)


def test_the_admin_call_clears_what_it_names_and_nothing_else(stack):
    for tenant in ("alpha", "beta"):
        before = _entries(stack, tenant)
        for model in ("small", "other"):
            _ask(stack, tenant, model, seed=5)
        _kept(stack, tenant, before + 2)
    beta_before = _entries(stack, "beta")
    assert stack.request("POST", "/admin/cache/clear", b"{}",
                         {"Authorization": f"Bearer {KEYS['alpha']}"}).status == 403  # a tenant's key
    cleared = _admin(stack, "POST", "/admin/cache/clear", {"tenant": "alpha", "tier": "other"}).json()
    assert cleared["cleared"] >= 1 and cleared["scopes"] == ["t:alpha"]
    left = _entries(stack, "alpha")
    assert _ask(stack, "alpha", "other", seed=5)[1]["x-tiergate-cache"] == "miss"
    _kept(stack, "alpha", left + 1)
    assert _ask(stack, "alpha", "small", seed=5)[1]["x-tiergate-cache"] == "hit"  # the other tier stays
    assert _entries(stack, "beta") == beta_before  # and the other tenant's cache
    _admin(stack, "POST", "/admin/cache/clear", {"tenant": "alpha"})
    assert _entries(stack, "alpha") == 0 and _entries(stack, "beta") == beta_before
    assert _ask(stack, "beta", "other", seed=5)[1]["x-tiergate-cache"] == "hit"
    bad = _admin(stack, "POST", "/admin/cache/clear", {"tier": "nope"})
    assert bad.status == 400 and bad.json()["error"]["param"] == "tier"


def test_anthropic_messages_are_served_from_the_cache_in_their_own_format(stack):
    client = anthropic.Anthropic(base_url=stack.url, api_key=KEYS["beta"], max_retries=0, timeout=120)
    ask = {"model": "small", "max_tokens": 12, "messages": [{"role": "user", "content": "Name one planet."}],
           "extra_headers": {"x-tiergate-cache-mode": "exact"}}  # sampled, but asked for by header
    before = _entries(stack, "beta")
    first = client.messages.with_raw_response.create(**ask)
    assert first.headers["x-tiergate-cache"] == "miss"
    _kept(stack, "beta", before + 1)
    again = client.messages.with_raw_response.create(**ask)
    assert again.headers["x-tiergate-cache"] == "hit"
    one, two = first.parse(), again.parse()
    assert two.content[0].text == one.content[0].text and two.usage == one.usage and two.id != one.id
    with client.messages.stream(**ask) as streamed:  # a stream is its own entry: kept, then replayed
        text = streamed.get_final_text()
    _kept(stack, "beta", before + 2)
    with client.messages.with_streaming_response.create(**ask, stream=True) as raw:
        assert raw.headers["x-tiergate-cache"] == "hit"
        events = [line for line in raw.iter_lines() if line.startswith("data:")]
    deltas = [json.loads(line[5:]) for line in events]
    assert "".join(d["delta"].get("text", "") for d in deltas if d.get("type") == "content_block_delta") == text
