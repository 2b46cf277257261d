"""deploy/k8s/ha: Redis with Sentinel. Three pods, each a Redis beside a Sentinel, one per node; the
sentinels watch the master by pod name through the headless Service with a quorum of 2 of 3 (a
majority: one lost node neither blocks a failover nor lets a lone sentinel call one); the gateway
config names those sentinels and the master they watch, and is otherwise the base config.
Persistence and noeviction below the memory limit are checked with the single Redis in
test_k8s_manifests.py."""
from __future__ import annotations

import re

from gateway.config import parse_config

from .manifests import BASE, HA_DOCS, container_named, containers, gateway_config, one, service_host

STS = one("StatefulSet", "tiergate-redis-ha", HA_DOCS)
SCRIPTS = one("ConfigMap", "tiergate-redis-ha", HA_DOCS)["data"]
HEADLESS = one("Service", STS["spec"]["serviceName"], HA_DOCS)


def _sentinel_conf() -> list[list[str]]:
    return [line.split() for line in SCRIPTS["sentinel.conf"].splitlines() if line.strip()]


def _monitor() -> list[str]:
    """name, host, port, quorum of the `sentinel monitor` line."""
    (line,) = [words[2:] for words in _sentinel_conf() if words[:2] == ["sentinel", "monitor"]]
    return line


def _shell_value(name: str) -> str:
    return re.search(rf"^{name}=(\S+)$", SCRIPTS["common.sh"], re.MULTILINE).group(1).strip('"')


def _port(name: str) -> int:
    """The headless Service's port of that name, checked against the container port behind it."""
    (port,) = [p for p in HEADLESS["spec"]["ports"] if p["name"] == name]
    (container_port,) = [p["containerPort"] for c in containers(STS) for p in c["ports"] if p["name"] == name]
    assert port["port"] == container_port
    return container_port


def test_three_redis_and_three_sentinels_with_a_majority_quorum():
    assert STS["spec"]["replicas"] == 3
    assert {c["name"] for c in containers(STS)} == {"redis", "sentinel"}
    *_, quorum = _monitor()
    assert int(quorum) == 2 == STS["spec"]["replicas"] // 2 + 1


def test_sentinels_watch_the_master_by_pod_name_through_the_headless_service():
    assert HEADLESS["spec"]["clusterIP"] == "None" and HEADLESS["spec"]["publishNotReadyAddresses"]
    assert _shell_value("HEADLESS") == service_host(HEADLESS)
    # on a first start nobody answers current_master and pod 0 is the master
    assert _shell_value("SEED") == f"{STS['metadata']['name']}-0.$HEADLESS"
    _, host, port, _ = _monitor()
    assert host == "@MASTER@" and 's/@MASTER@/$master/' in SCRIPTS["sentinel.sh"]
    assert "master=$(current_master)" in SCRIPTS["sentinel.sh"] and "master=$(current_master)" in SCRIPTS["redis.sh"]
    assert int(port) == _port("redis")
    conf = _sentinel_conf()
    assert ["port", str(_port("sentinel"))] in conf
    # a monitor by hostname needs resolve-hostnames before it; failovers announce names, not pod IPs
    resolve = conf.index(["sentinel", "resolve-hostnames", "yes"])
    assert resolve < conf.index(["sentinel", "monitor", *_monitor()]) and ["sentinel", "announce-hostnames", "yes"] in conf
    assert '--replica-announce-ip "$ME"' in SCRIPTS["redis.sh"]


def test_one_pod_per_node_and_at_most_one_down_for_maintenance():
    own_pods = STS["spec"]["selector"]["matchLabels"]  # the set's pods, nothing else
    (rule,) = STS["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert rule["topologyKey"] == "kubernetes.io/hostname" and rule["labelSelector"]["matchLabels"] == own_pods
    budget = one("PodDisruptionBudget", STS["metadata"]["name"], HA_DOCS)
    assert budget["spec"]["maxUnavailable"] == 1 and budget["spec"]["selector"] == STS["spec"]["selector"]


def test_each_pod_has_its_own_volume_and_a_master_cut_off_from_its_replicas_stops_acknowledging():
    args = container_named(STS, "redis")["args"]
    assert int(args[args.index("--min-replicas-to-write") + 1]) >= 1
    assert int(args[args.index("--min-replicas-max-lag") + 1]) <= 10
    (claim,) = STS["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_gateway_config_names_these_sentinels_and_is_otherwise_the_base_config():
    ha, base = gateway_config(HA_DOCS), gateway_config(BASE)
    assert {k: v for k, v in ha.items() if k != "redis"} == {k: v for k, v in base.items() if k != "redis"}
    name, *_ = _monitor()
    pods = [f"{STS['metadata']['name']}-{i}.{service_host(HEADLESS)}" for i in range(STS["spec"]["replicas"])]
    assert ha["redis"] == {"mode": "sentinel", "master_name": name, "password_env": "TIERGATE_REDIS_PASSWORD",
                           "sentinels": [f"{pod}:{_port('sentinel')}" for pod in pods]}
    settings = parse_config(ha, "deploy/k8s/ha/config.yaml").redis  # the gateway's own reader takes it
    assert (settings.mode, settings.master_name, list(settings.sentinels)) == ("sentinel", name, ha["redis"]["sentinels"])
