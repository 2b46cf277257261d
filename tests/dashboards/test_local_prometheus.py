"""`python -m launcher --prometheus`: the Prometheus the local stack starts scrapes the gateway."""
from __future__ import annotations

import asyncio

import aiohttp
import pytest
import yaml

from tests.dashboards.dash_helpers import prometheus_binary
from dashboards.scrape_config import render
from launcher import prometheus as local_prometheus
from launcher.workers import worker_targets
from tests.support import Pending, free_port, wait_for
from gateway.app import build_app, start_site
from gateway.core.classify import PromptLengthClassifier
from gateway.config import load_config
from gateway.state import GatewayState
from tests.gateway.gw_helpers import tier


@pytest.fixture
async def gateway_for(tmp_path):
    """A gateway process-in-test for some worker URLs (no Redis: nothing here routes)."""
    runners = []

    async def start(tiers: list[dict]):
        path = tmp_path / "gateway.yaml"
        path.write_text(yaml.safe_dump({"tiers": tiers}))
        state = GatewayState(load_config(path), classifier=PromptLengthClassifier())
        runner = await start_site(build_app(state), "127.0.0.1", 0)
        runners.append(runner)
        return state.services.config, runner.addresses[0][1]

    yield start
    for runner in runners:
        await runner.cleanup()


async def test_modes_without_the_binary(tmp_path, monkeypatch, gateway_for):
    config, _ = await gateway_for([tier("small", 1, ["http://127.0.0.1:9"])])
    monkeypatch.setenv("PATH", str(tmp_path))  # no prometheus binary here
    assert local_prometheus.start(config, 8080, "auto", free_port(), tmp_path) is None
    assert local_prometheus.start(config, 8080, "off", free_port(), tmp_path) is None
    with pytest.raises(local_prometheus.PrometheusUnavailable, match="apt-get install prometheus"):
        local_prometheus.start(config, 8080, "on", free_port(), tmp_path)


@pytest.mark.live  # a Prometheus server
async def test_started_prometheus_scrapes_the_gateway(tmp_path, gateway_for):
    workers = ["http://127.0.0.1:8101", "http://127.0.0.1:8102", "http://remote.example:8000"]
    config, gateway_port = await gateway_for([tier("small", 1, workers[:2]), tier("large", 3, workers[2:])])
    doc = yaml.safe_load(render(f"127.0.0.1:{gateway_port}", worker_targets(config)))
    assert [job["static_configs"][0]["targets"] for job in doc["scrape_configs"]] == [
        [f"127.0.0.1:{gateway_port}"], ["127.0.0.1:8101", "127.0.0.1:8102", "remote.example:8000"]]
    prometheus_binary()  # installed by `make setup`; missing, the test fails here
    port = free_port()
    proc = await asyncio.to_thread(local_prometheus.start, config, gateway_port, "on", port, tmp_path)
    try:
        scrape = (tmp_path / "prometheus.yml").read_text()
        assert "127.0.0.1:8101" in scrape and "127.0.0.1:8102" in scrape and "remote.example" not in scrape
        async with aiohttp.ClientSession() as session:
            async def gateway_targets() -> dict:
                async with session.get(f"http://127.0.0.1:{port}/api/v1/targets") as response:
                    targets = (await response.json())["data"]["activeTargets"]
                health = {t["labels"]["job"]: t["health"] for t in targets
                          if t["scrapeUrl"].endswith(f":{gateway_port}/metrics")}
                return health if health.get("tiergate-gateway") == "up" else Pending(health)

            health = await wait_for(gateway_targets, 20, 0.2, what="Prometheus scraping the gateway")
        assert health == {"tiergate-gateway": "up"}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_workers_with_a_key_are_scraped_with_it(tmp_path, monkeypatch, gateway_for):
    monkeypatch.setenv("TEST_SCRAPE_WORKER_KEY", "scrape-key")
    keyed = {**tier("small", 1, ["http://127.0.0.1:8101"]), "api_key_env": "TEST_SCRAPE_WORKER_KEY"}
    config, gateway_port = await gateway_for([keyed, tier("large", 3, ["http://remote.example:8000"])])
    targets = ["127.0.0.1:8101"]
    path = local_prometheus.worker_key_file(config, targets, tmp_path)
    assert path.read_text() == "scrape-key" and path.stat().st_mode & 0o077 == 0  # the owner's alone
    doc = yaml.safe_load(render(f"127.0.0.1:{gateway_port}", targets, worker_key_file=str(path)))
    assert doc["scrape_configs"][1]["authorization"] == {"type": "Bearer", "credentials_file": str(path)}
    assert local_prometheus.worker_key_file(config, ["remote.example:8000"], tmp_path / "none") is None
