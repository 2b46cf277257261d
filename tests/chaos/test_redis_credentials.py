"""Redis with a password in every mode the gateway speaks (one server, a Sentinel group whose
Sentinels also ask for it and log in to the servers with auth-pass, a Cluster), and one server and
a Cluster speaking only TLS (clients, replication, the cluster bus) under a CA made for the test: the gateway logs in from `password_file` (and
checks the CA), admits and bills on it, while a client without the password is refused."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest
import redis
import redis.asyncio as aioredis

from launcher.redis_topology import start_cluster, start_sentinel_group, start_single
from policies.store import PolicyStore
from tests.chaos.redis_modes_helpers import Load, client_for, gateway_doc, ledger_spend, log_paths, log_spend
from tests.support.tls import local_server_tls

PASSWORD = "pw-" + uuid.uuid4().hex
STARTS = {"single": start_single, "sentinel": start_sentinel_group, "cluster": start_cluster}


@pytest.fixture(params=sorted(STARTS))
def topology(request, tmp_path):
    top = STARTS[request.param](tmp_path / "redis", password=PASSWORD)
    yield top
    top.stop()


async def _served_and_billed(top, fakes, gateway, http, tmp_path) -> None:
    """A gateway on `top` admits at a limit exactly and bills every answer once in its ledger."""
    (_, url), = await fakes(1)
    keys = f"tgauth-{uuid.uuid4().hex[:8]}:"
    tenants = {"acme": {"rate_limits": {"requests_per_minute": 5}}, "bill": {"budgets": {"daily_usd": {"hard": 100}}}}
    gw = await gateway(gateway_doc(top, url, keys, tmp_path / "usage", tenants, "closed", timeout_s=5))
    answers = await Load(http, [gw.url]).burst(["acme"] * 8 + ["bill"] * 3, concurrency=4)
    assert [s for s, _ in answers[:8]].count(200) == 5 and [s for s, _ in answers[8:]] == [200] * 3
    store = PolicyStore(client_for(top, keys), keys, 60)
    try:
        month = datetime.now(timezone.utc).strftime("%Y-%m")
        logged = log_spend(log_paths(tmp_path / "usage"))
        assert (await ledger_spend(store, ["bill"], month))["bill"] == logged["bill"] > 0
    finally:
        await store.redis.aclose()


async def test_the_gateway_logs_in_with_the_password_in_every_mode(topology, fakes, gateway, http, tmp_path):
    assert "password" not in topology.settings and topology.settings["password_file"]  # never inline
    port = next(iter(topology.servers))
    with pytest.raises(redis.AuthenticationError):  # requirepass is on: no password, no command
        redis.Redis(port=port, socket_timeout=1).ping()
    await _served_and_billed(topology, fakes, gateway, http, tmp_path)


@pytest.mark.parametrize("start", [start_single, start_cluster], ids=["single", "cluster"])
async def test_tls_only_servers_are_reached_through_the_configured_ca(start, fakes, gateway, http, tmp_path):
    tls = local_server_tls(tmp_path / "tls")
    top = start(tmp_path / "redis", password=PASSWORD, tls=tls)
    try:
        port = next(iter(top.servers))
        with pytest.raises(redis.ConnectionError):  # plain text is not spoken there
            redis.Redis(port=port, password=PASSWORD, socket_timeout=1).ping()
        untrusted = aioredis.Redis(port=port, password=PASSWORD, ssl=True, socket_timeout=1)
        with pytest.raises(redis.ConnectionError, match="certificate verify failed"):  # not the system's CAs
            await untrusted.ping()
        await untrusted.aclose()
        await _served_and_billed(top, fakes, gateway, http, tmp_path)
    finally:
        top.stop()
