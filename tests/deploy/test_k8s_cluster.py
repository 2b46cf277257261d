"""deploy/k8s/cluster: a Redis Cluster of six nodes (one StatefulSet) that a Job forms into three
masters with a replica each; the gateway config names the nodes through the headless Service and is
otherwise the base config."""
from __future__ import annotations

from gateway.config import parse_config

from .manifests import BASE, CLUSTER_DOCS, container_named, gateway_config, one, service_host

STS = one("StatefulSet", "tiergate-redis-cluster", CLUSTER_DOCS)
SCRIPTS = one("ConfigMap", "tiergate-redis-cluster", CLUSTER_DOCS)["data"]
HEADLESS = one("Service", STS["spec"]["serviceName"], CLUSTER_DOCS)


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_six_nodes_formed_into_three_masters_with_a_replica_each():
    args = container_named(STS, "redis")["args"]
    assert STS["spec"]["replicas"] == 6 and _flag(args, "--cluster-enabled") == "yes"
    assert _flag(args, "--cluster-require-full-coverage") == "no"  # the other masters serve during a failover
    assert _flag(args, "--cluster-config-file").startswith("/data/")  # on the node's own volume
    assert "--cluster-replicas 1" in SCRIPTS["create.sh"] and "for i in 0 1 2 3 4 5" in SCRIPTS["create.sh"]
    job = one("Job", "tiergate-redis-cluster-create", CLUSTER_DOCS)
    assert job["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"] == "tiergate-redis-cluster"


def test_gateway_config_names_the_nodes_and_is_otherwise_the_base_config():
    cluster, base = gateway_config(CLUSTER_DOCS), gateway_config(BASE)
    assert {k: v for k, v in cluster.items() if k != "redis"} == {k: v for k, v in base.items() if k != "redis"}
    settings = parse_config(cluster, "deploy/k8s/cluster/config.yaml").redis
    pods = {f"{STS['metadata']['name']}-{i}.{service_host(HEADLESS)}:6379" for i in range(STS["spec"]["replicas"])}
    assert settings.mode == "cluster" and set(settings.cluster_nodes) <= pods and len(settings.cluster_nodes) >= 3
    assert settings.password_env == "TIERGATE_REDIS_PASSWORD"
