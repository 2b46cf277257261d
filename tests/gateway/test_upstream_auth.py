"""The upstream API key (`api_key_env`): read from the environment at load, sent as
`Authorization: Bearer` on every call to that upstream (generations, streams, health checks),
never the client's key, and never visible in logs, /metrics, /health or error bodies."""
from __future__ import annotations

import logging
import uuid

import openai
import pytest

from gateway.config import ConfigError, parse_config
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for

ENV, ENV2 = "TG_TEST_UPSTREAM_KEY", "TG_TEST_UPSTREAM_KEY2"
UPSTREAM_KEY = "sk-upstream-" + uuid.uuid4().hex
ROTATED_KEY = "sk-rotated-" + uuid.uuid4().hex
CLIENT_KEY = "sk-client-" + uuid.uuid4().hex
CHAT = [{"role": "user", "content": "hi"}]


def keyed_config(url: str, prefix: str, env: str = ENV) -> dict:
    small = tier("small", 1, [])
    small["workers"] = [{"url": url, "api_key_env": env}]
    return base_config([small], prefix)


@pytest.fixture
async def keyed(fakes, gateway, redis_prefix, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, aiohttp's included
    monkeypatch.setenv(ENV, UPSTREAM_KEY)
    ((fake, url),) = await fakes(1, chunks=3)
    fake.api_key = UPSTREAM_KEY  # like `vllm serve --api-key`: refuses calls without it
    gw = await gateway(keyed_config(url, redis_prefix))
    client = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    yield gw, fake, client
    await client.close()


def _no_secret(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret.split("-")[-1][:16] not in text, "key material leaked"


async def test_every_upstream_call_carries_the_upstream_key_never_the_clients(keyed, http):
    gw, fake, client = keyed
    answer = await client.chat.completions.create(model="small", messages=CHAT, max_tokens=2)
    assert answer.choices[0].message.content == "w0 w1"
    stream = await client.chat.completions.create(model="small", messages=CHAT, stream=True)
    assert len([c async for c in stream if c.choices]) == 3
    done = await client.completions.create(model="small", prompt="hi", max_tokens=1)
    assert done.choices[0].text == "w0"
    assert len(fake.seen) == 3 and fake.served == 3
    for seen in fake.seen:
        assert seen["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}"
        _no_secret(repr(seen), CLIENT_KEY)
    await wait_for(lambda: fake.health_headers, 5, what="a health check")  # they run every 0.2 s
    assert fake.health_headers and all(h["authorization"] == f"Bearer {UPSTREAM_KEY}" for h in fake.health_headers)


async def test_upstream_refusing_the_key_is_a_worker_failure_not_a_client_401(keyed, http, caplog):
    gw, fake, client = keyed
    fake.api_key = "sk-something-else"
    with pytest.raises(openai.APIStatusError) as err:
        await client.chat.completions.create(model="small", messages=CHAT, max_tokens=2)
    assert err.value.status_code == 503  # not the upstream's 401: the client's own key was fine
    assert err.value.body["code"] == "upstream_unavailable" and "HTTP 401" in err.value.body["message"]
    fake.api_key, fake.fail_status = UPSTREAM_KEY, 500
    with pytest.raises(openai.APIStatusError):
        await client.chat.completions.create(model="small", messages=CHAT, stream=True)
    fake.fail_status = None
    async with http.get(gw.url + "/metrics") as r:
        metrics = await r.text()
    assert 'kind="http_401"' in metrics  # the refusal is counted, per worker
    async with http.get(gw.url + "/health") as r:
        health = await r.text()
    async with http.post(gw.url + "/v1/route", json={"model": "small", "messages": CHAT}) as r:
        route = await r.text()
    captured = caplog.text + "".join(repr(r.__dict__) for r in caplog.records)
    assert "backend" in health and "127.0.0.1" in route
    for text in (metrics, health, route, captured, repr(gw.state.services.config), repr(gw.state.services.upstreams.pools.backends)):
        _no_secret(text, UPSTREAM_KEY, CLIENT_KEY)


async def test_reload_picks_up_another_key_for_the_same_url(keyed, monkeypatch, redis_prefix):
    gw, fake, client = keyed
    monkeypatch.setenv(ENV2, ROTATED_KEY)
    url = gw.state.services.config.tiers[0].workers[0].url
    gw.rewrite(keyed_config(url, redis_prefix, env=ENV2))
    assert gw.state.reload()
    fake.api_key = ROTATED_KEY
    await client.chat.completions.create(model="small", messages=CHAT, max_tokens=1)
    assert fake.seen[-1]["headers"]["authorization"] == f"Bearer {ROTATED_KEY}"


def _doc(workers: list[dict], **tier_fields) -> dict:
    return {"tiers": [{"name": "t", "level": 1, "model": "m", "price_per_mtok": {"input": 1, "output": 1},
                       "workers": workers, **tier_fields}]}


def test_key_comes_from_the_environment_per_worker_or_per_tier(monkeypatch):
    monkeypatch.setenv(ENV, UPSTREAM_KEY)
    monkeypatch.setenv(ENV2, ROTATED_KEY)
    config = parse_config(_doc([{"url": "http://a:1"}, {"url": "http://b:1", "api_key_env": ENV2}],
                               api_key_env=ENV))
    a, b = config.tiers[0].workers
    assert (a.api_key_env, a.api_key, b.api_key_env, b.api_key) == (ENV, UPSTREAM_KEY, ENV2, ROTATED_KEY)
    assert UPSTREAM_KEY not in repr(config.tiers[0]) and ROTATED_KEY not in repr(b)
    assert parse_config(_doc([{"url": "http://a:1"}])).tiers[0].workers[0].api_key is None


@pytest.mark.parametrize("workers,tier_fields,field,why", [
    ([{"url": "http://a:1", "api_key_env": "TG_TEST_UNSET_VAR"}], {}, "tiers[0].workers[0].api_key_env",
     "TG_TEST_UNSET_VAR is not set"),
    ([{"url": "http://a:1"}], {"api_key_env": "TG_TEST_EMPTY_VAR"}, "tiers[0].workers[0].api_key_env",
     "TG_TEST_EMPTY_VAR is not set or empty"),
    ([{"url": "http://a:1", "api_key_env": "not a name"}], {}, "tiers[0].workers[0].api_key_env",
     "environment variable name"),
    ([{"url": "http://a:1", "api_key": UPSTREAM_KEY}], {}, "tiers[0].workers[0].api_key", "never put a key"),
    ([{"url": "http://a:1"}], {"api_key": UPSTREAM_KEY}, "tiers[0].api_key", "never put a key"),
])
def test_bad_key_settings_are_config_errors_that_name_the_field(monkeypatch, workers, tier_fields, field, why):
    monkeypatch.delenv("TG_TEST_UNSET_VAR", raising=False)
    monkeypatch.setenv("TG_TEST_EMPTY_VAR", "  ")
    with pytest.raises(ConfigError) as err:
        parse_config(_doc(workers, **tier_fields), "gw.yaml")
    assert f"gw.yaml: {field}:" in str(err.value) and why in str(err.value)
    assert UPSTREAM_KEY not in str(err.value)


def test_one_url_listed_by_two_tiers_must_name_one_key(monkeypatch):
    monkeypatch.setenv(ENV, UPSTREAM_KEY)
    monkeypatch.setenv(ENV2, ROTATED_KEY)
    doc = _doc([{"url": "http://a:1", "api_key_env": ENV}])
    doc["tiers"].append(dict(doc["tiers"][0], name="u", level=2, workers=[{"url": "http://a:1", "api_key_env": ENV2}]))
    with pytest.raises(ConfigError, match=r"tiers\[1\]\.workers\[0\]\.api_key_env: .*one upstream URL has one key"):
        parse_config(doc)
    doc["tiers"][1]["workers"][0]["api_key_env"] = ENV
    assert parse_config(doc).tiers[1].workers[0].api_key == UPSTREAM_KEY
