"""Config validation names the field; hot reload applies good configs, keeps the old on bad ones."""
from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import openai
import pytest

from gateway.config import ConfigError, load_config, parse_config
from gateway.core.metrics import METRICS
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for
from tests.support.scripted_transport import Reply, ScriptedTransport, Sent, worker

GOOD = {"tiers": [tier("small", 1, ["http://127.0.0.1:9"]), tier("large", 2, ["http://127.0.0.1:10"])]}


def test_default_config_loads(monkeypatch):
    monkeypatch.setenv("TIERGATE_WORKER_KEY", "test-worker-key")  # the shipped config sends it to our workers
    config = load_config(Path(__file__).parents[2] / "config" / "tiergate.yaml")
    assert [t.level for t in config.tiers] == sorted(t.level for t in config.tiers) and len(config.tiers) >= 2
    assert config.resolve_model("auto") == "auto"


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["tiers"][1]["price_per_mtok"].update(input=-1), "tiers[1].price_per_mtok.input"),
    (lambda d: d["tiers"][0].pop("model"), "tiers[0].model"),
    (lambda d: d["tiers"][0].update(level="high"), "tiers[0].level"),
    (lambda d: d["tiers"][1]["workers"][0].update(url="ftp://x"), "tiers[1].workers[0].url"),
    (lambda d: d["tiers"][1]["workers"][0].update(url="ftp://u:secret@h:1"), "tiers[1].workers[0].url"),
    (lambda d: d["tiers"][1]["workers"][0].update(url="http://h:1/v1?key=secret"), "tiers[1].workers[0].url"),
    (lambda d: d["tiers"][1].update(workers=[]), "tiers[1].workers"),
    (lambda d: d["tiers"][1].update(name="small"), "tiers[1].name"),
    (lambda d: d.update(aliases={"fast": "nonexistent"}), "aliases.fast"),
    (lambda d: d.update(timeouts={"connect_s": 0}), "timeouts.connect_s"),
    (lambda d: d.update(affinity={"chunk_chars": 2}), "affinity.chunk_chars"),
    (lambda d: d.update(redis={"url": 5}), "redis.url"),
    (lambda d: d.update(redis={"mode": "replicated"}), "redis.mode"),
    (lambda d: d.update(redis={"mode": "sentinel", "master_name": "m"}), "redis.sentinels"),
    (lambda d: d.update(redis={"mode": "sentinel", "sentinels": ["h:26379"]}), "redis.master_name"),
    (lambda d: d.update(redis={"mode": "sentinel", "sentinels": ["h"], "master_name": "m"}), "redis.sentinels[0]"),
    (lambda d: d.update(redis={"mode": "sentinel", "sentinels": ["h:1"], "master_name": "m", "url": "redis://h"}),
     "redis.url"),  # a URL the mode would not use is an error, not ignored
    (lambda d: d.update(redis={"mode": "cluster"}), "redis.cluster_nodes"),
    (lambda d: d.update(redis={"mode": "cluster", "cluster_nodes": ["h:70000"]}), "redis.cluster_nodes[0]"),
    (lambda d: d.update(redis={"cluster_nodes": ["h:7000"]}), "redis.cluster_nodes"),
    (lambda d: d.update(redis={"key_prefix": "x{y}:"}), "redis.key_prefix"),  # would be every key's hash tag
    (lambda d: d.update(failover={"max_attempts": 3, "escalte": True}), "failover.escalte"),
    (lambda d: d.update(tiers=[]), "tiers"),
    (lambda d: d["tiers"][1]["workers"][0].update(device="gpu"), "tiers[1].workers[0].device"),
    (lambda d: d.update(budgets={"daily_usd": {"hard": 1}}), "budgets"),  # belongs under policy or a tenant
    (lambda d: d.update(rate_limits={"requests_per_minute": 5}), "rate_limits"),
    (lambda d: d.update(usage_log={"dir": "x"}), "usage_log"),
    (lambda d: d.update(consol={"log_prompts": True}), "consol"),
    (lambda d: d.update(console={"log_prompts": "yes"}), "console.log_prompts"),
    (lambda d: d.update(console={"recent": 1}), "console.recent"),
    (lambda d: d.update(policy={"bogus": 1}), "policy.bogus"),  # validated even without tenants
    (lambda d: d.update(policy={"key_prefix": "p:"}), "policy.key_prefix"),
    (lambda d: d.update(policy={"redis_timeout_s": 1}), "policy.redis_timeout_s"),
    (lambda d: d.update(tenants={"a": {"max_tier": "huge"}}), "tenants.a.max_tier"),
    (lambda d: d.update(quality={"window": 1}), "quality.window"),
    (lambda d: d["tiers"][0].update(quality={}), "tiers[0].quality"),  # a section one level too deep
    (lambda d: d["tiers"][0]["workers"][0].update(health={}), "tiers[0].workers[0].health"),
    (lambda d: d.update(tiers="small"), "tiers"),
])
def test_errors_name_the_field(mutate, field):
    doc = copy.deepcopy(GOOD)
    mutate(doc)
    with pytest.raises(ConfigError) as err:
        parse_config(doc, "test.yaml")
    assert str(err.value).startswith(f"test.yaml: {field}:")
    assert "secret" not in str(err.value)  # a credential in a bad URL is not echoed into logs


def test_worker_device_is_shorthand_for_launch_flags():
    doc = copy.deepcopy(GOOD)
    doc["tiers"][1]["workers"][0].update(device="cuda", launch=["--dtype", "float16"])
    assert parse_config(doc, "test.yaml").tiers[1].workers[0].launch == ("--device", "cuda", "--dtype", "float16")


def test_a_misplaced_section_says_where_it_belongs():
    with pytest.raises(ConfigError, match="budgets: not a top-level section; it belongs under policy.defaults.budgets"):
        parse_config({**GOOD, "budgets": {}}, "test.yaml")


@pytest.mark.parametrize("old, new", [("key_prefix", "redis.key_prefix"),
                                      ("redis_timeout_s", "redis.socket_timeout_s")])
def test_a_removed_duplicate_knob_names_the_one_to_use(old, new):
    with pytest.raises(ConfigError) as err:
        parse_config({**GOOD, "policy": {old: 1}}, "test.yaml")
    assert str(err.value).startswith(f"test.yaml: policy.{old}: ") and new in str(err.value)


def test_defaults_are_the_dataclass_defaults():
    """An unset section equals its dataclass built with no arguments: no second copy of a default."""
    config = parse_config(GOOD)
    for section in (config.redis, config.timeouts, config.failover, config.health, config.breaker,
                    config.affinity, config.limits, config.console, config.policies):
        assert section == type(section)(), type(section).__name__
    assert config.quality == type(config.quality)(enabled=False)  # no quality: section: the monitor is off
    assert parse_config({**GOOD, "quality": {}}).quality == type(config.quality)()


def test_shipped_config_sets_only_what_differs_from_the_defaults():
    """config/tiergate.yaml restates no default, so the dataclasses stay the one place for them."""
    import yaml

    doc = yaml.safe_load((Path(__file__).parents[2] / "config" / "tiergate.yaml").read_text())
    defaults = parse_config({"tiers": GOOD["tiers"]})
    for name, section in doc.items():
        current = getattr(defaults, name, None)
        if isinstance(section, dict) and current is not None and hasattr(current, "__dataclass_fields__"):
            same = [k for k, v in section.items() if getattr(current, k, object()) == v]
            assert same == [], f"{name}: {same} restate the defaults"


def test_unreadable_or_invalid_yaml_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("tiers: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")


async def _models(client) -> set[str]:
    return {m.id for m in (await client.models.list()).data}


async def test_file_change_reloads_and_bad_config_is_rejected(gateway, redis_prefix):
    doc = base_config([tier("small", 1, ["http://worker.test"])], redis_prefix)
    gw = await gateway(doc, transport=ScriptedTransport(worker))
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0) as client:
        gw.rewrite({**doc, "aliases": {"quick": "small"}})
        await wait_for(lambda: _has(client, "quick"), timeout_s=10)
        rejected = METRICS.reloads.labels("rejected")._value.get()
        gw.path.write_text("tiers: [{name: broken}]")
        await wait_for(lambda: METRICS.reloads.labels("rejected")._value.get() > rejected, timeout_s=10)
        assert "quick" in await _models(client)  # old config kept
        answer = await client.chat.completions.create(model="quick", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content


async def _has(client, model):
    return model in await _models(client)


async def test_reload_does_not_drop_in_flight_requests(gateway, redis_prefix):
    old, new = "http://old.test", "http://new.test"  # workers played by the scripted transport
    release = asyncio.Event()  # the old worker answers once the reload is done

    def script(sent: Sent) -> Reply:
        reply = worker(sent)
        if sent.method == "POST" and sent.url.startswith(old):
            reply.hold = release
        return reply

    transport = ScriptedTransport(script)
    gw = await gateway(base_config([tier("small", 1, [old])], redis_prefix), transport=transport)
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0) as client:
        pending = asyncio.ensure_future(client.chat.completions.create(
            model="small", messages=[{"role": "user", "content": "hi"}]))
        await wait_for(lambda: transport.posts_to(old) == 1, timeout_s=5)  # the request is at the old worker
        gw.rewrite(base_config([tier("small", 1, [new])], redis_prefix))
        assert gw.state.reload()  # what SIGHUP triggers
        raw = await client.chat.completions.with_raw_response.create(
            model="small", messages=[{"role": "user", "content": "hi"}])
        assert raw.headers["x-tiergate-backend"] == gw.state.services.upstreams.pools.backends[new].label
        release.set()
        answer = await pending
    assert answer.choices[0].message.content and transport.posts_to(old) == 1 and transport.posts_to(new) == 1
