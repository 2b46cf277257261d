"""The Sentinel set's shipped settings (deploy/k8s/ha/redis-sentinel.yaml) run as they are on real
servers on loopback: a Redis with the StatefulSet's args, a replica of it as redis.sh starts one,
and a Sentinel from the ConfigMap's template, each with the password lines auth.sh writes from
REDISCLI_AUTH (so the replica and the Sentinel log in, and a client without it is refused). Only what
cannot be the same outside a pod changes: ports, folders, names (localhost for the pods' DNS names)
and a loopback bind."""
from __future__ import annotations

import os
import subprocess
import uuid

import pytest
import redis

from launcher.processes import REDIS_SERVER
from tests.support import free_port, stop_processes, wait_for_port, wait_until

from .manifests import HA_DOCS, container_named, one

pytestmark = pytest.mark.live

STS = one("StatefulSet", "tiergate-redis-ha", HA_DOCS)
SCRIPTS = one("ConfigMap", "tiergate-redis-ha", HA_DOCS)["data"]
LOOPBACK = ["--bind", "127.0.0.1 -::1"]
PASSWORD = "pw-" + uuid.uuid4().hex


def _auth_lines(function: str, folder) -> str:
    """What auth.sh's redis_auth or sentinel_auth writes, run by sh with the password in REDISCLI_AUTH."""
    script = folder / "auth.sh"
    script.write_text(SCRIPTS["auth.sh"])
    done = subprocess.run(["sh", "-c", f". {script}; {function}"], env={**os.environ, "REDISCLI_AUTH": PASSWORD},
                          capture_output=True, text=True, check=True, timeout=10)
    return done.stdout


def _redis_args(port: int, folder) -> list[str]:
    auth = folder / "auth.conf"
    auth.write_text(_auth_lines("redis_auth", folder))
    args = list(container_named(STS, "redis")["args"])
    args[args.index("--port") + 1], args[args.index("--dir") + 1] = str(port), str(folder)
    # redis.sh puts the auth file first, then these args and the pod's name
    return [str(auth), *args, *LOOPBACK, "--replica-announce-ip", "localhost"]


def _sentinel_conf(port: int, master_port: int, folder) -> str:
    rendered = []
    for line in SCRIPTS["sentinel.conf"].replace("@MASTER@", "localhost").replace("@ME@", "localhost").splitlines():
        words = line.split()
        if words[:1] == ["port"]:
            words[1] = str(port)
        elif words[:1] == ["dir"]:
            words[1] = str(folder)
        elif words[:2] == ["sentinel", "monitor"]:
            words[4] = str(master_port)
        rendered.append(" ".join(words))
    return "\n".join(rendered + ["bind 127.0.0.1 -::1"]) + "\n" + _auth_lines("sentinel_auth", folder)


def _start(args: list[str], port: int, procs: list[subprocess.Popen]) -> redis.Redis:
    procs.append(subprocess.Popen([REDIS_SERVER, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wait_for_port(port, procs, timeout_s=15)
    with pytest.raises(redis.AuthenticationError):  # every server and Sentinel asks for the password
        redis.Redis(port=port, socket_timeout=2).ping()
    return redis.Redis(port=port, socket_timeout=2, decode_responses=True, password=PASSWORD)


def test_master_replica_and_sentinel_run_with_the_shipped_settings(tmp_path):
    for folder in ("master", "replica", "sentinel"):
        (tmp_path / folder).mkdir()
    master_port, replica_port, sentinel_port = free_port(), free_port(), free_port()
    procs: list[subprocess.Popen] = []
    try:
        master = _start(_redis_args(master_port, tmp_path / "master"), master_port, procs)
        assert master.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        with pytest.raises(redis.ResponseError, match="NOREPLICAS"):  # no replica caught up: no acknowledged write
            master.set("deploy-test", "1")
        replica = _start(_redis_args(replica_port, tmp_path / "replica") + ["--replicaof", "localhost", str(master_port)],
                         replica_port, procs)
        wait_until(lambda: master.info("replication")["connected_slaves"] == 1, 15, what="the replica attached")
        wait_until(lambda: _accepts_write(master), 15, what="the master taking writes with a replica")
        wait_until(lambda: replica.get("deploy-test") == "1", 15, what="the write on the replica")

        conf = tmp_path / "sentinel" / "sentinel.conf"
        conf.write_text(_sentinel_conf(sentinel_port, master_port, tmp_path / "sentinel"))
        sentinel = _start([str(conf), "--sentinel"], sentinel_port, procs)
        watched = sentinel.sentinel_master("tiergate")
        assert (watched["ip"], watched["port"], watched["quorum"]) == ("localhost", master_port, 2)
        wait_until(lambda: [(r["ip"], r["port"]) for r in sentinel.sentinel_slaves("tiergate")]
                   == [("localhost", replica_port)], 15, what="the sentinel finding the replica by its announced name")
    finally:
        stop_processes(procs)


def _accepts_write(client: redis.Redis) -> bool:
    try:
        return bool(client.set("deploy-test", "1"))
    except redis.ResponseError:
        return False
