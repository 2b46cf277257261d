"""Zero trust in the shipped manifests, for each install (base, Sentinel, Cluster): every pod runs
restricted (non-root, no privilege escalation, no capabilities, a read-only root filesystem,
requests and limits); a default-deny NetworkPolicy, every policy's selectors naming real pods, and
the workers and Redis reachable from the gateway's pods alone (Redis also from its own set); Redis
asks for the password from a Secret in every topology, and the gateway brings it."""
from __future__ import annotations

import copy

import pytest

from gateway.config import parse_config

from .manifests import INSTALLS, containers, gateway_config, of, one, workloads

GATEWAY = {"app.kubernetes.io/name": "tiergate", "app.kubernetes.io/component": "gateway"}
REDIS_SECRET = {"name": "tiergate-redis-auth", "key": "password"}


def _labels(workload: dict) -> dict:
    return workload["spec"]["template"]["metadata"]["labels"]


def _matches(selector: dict, labels: dict) -> bool:
    """A label selector (matchLabels and matchExpressions) against one pod's labels."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for rule in selector.get("matchExpressions", []):
        present, value = rule["key"] in labels, labels.get(rule["key"])
        held = {"In": present and value in rule.get("values", []), "NotIn": value not in rule.get("values", []),
                "Exists": present, "DoesNotExist": not present}[rule["operator"]]
        if not held:
            return False
    return True


def _name(workload: dict) -> str:
    return f"{workload['kind']}/{workload['metadata']['name']}"


def _sources(install: list[dict], target: dict) -> dict[str, set[str]]:
    """Who may open a connection to `target`'s pods: workload name (or 'anyone') -> the policies
    that let it. A pod no Ingress policy selects takes anyone; one selected takes what the rules say."""
    selecting = [p for p in of("NetworkPolicy", install) if "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
                 and _matches(p["spec"]["podSelector"], _labels(target))]
    if not selecting:
        return {"anyone": {"(no policy selects it)"}}
    allowed: dict[str, set[str]] = {}
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            peers = rule.get("from")
            if not peers:  # no `from`: every source, in the cluster or outside it
                allowed.setdefault("anyone", set()).add(policy["metadata"]["name"])
            for peer in peers or []:
                if "ipBlock" in peer or "namespaceSelector" in peer:
                    allowed.setdefault("anyone", set()).add(policy["metadata"]["name"])
                    continue
                for source in workloads(install):
                    if _matches(peer["podSelector"], _labels(source)):
                        allowed.setdefault(_name(source), set()).add(policy["metadata"]["name"])
    return allowed


def _own_set(install: list[dict], target: dict) -> set[str]:
    """The pods of the same Redis set: the same component, or the same tiergate.dev/redis-set."""
    labels = _labels(target)
    return {_name(w) for w in workloads(install)
            if _labels(w)["app.kubernetes.io/component"] == labels["app.kubernetes.io/component"]
            or ("tiergate.dev/redis-set" in labels
                and _labels(w).get("tiergate.dev/redis-set") == labels["tiergate.dev/redis-set"])}


def reach_violations(install: list[dict]) -> list[str]:
    """Every way in to a worker or a Redis that is not the gateway (or, for Redis, its own set)."""
    gateways = {_name(w) for w in workloads(install) if GATEWAY.items() <= _labels(w).items()}
    found = []
    for target in workloads(install):
        labels = _labels(target)
        if labels["app.kubernetes.io/component"] == "worker":
            allowed_in = gateways
        elif labels.get("tiergate.dev/store") == "redis":
            allowed_in = gateways | _own_set(install, target)
        else:
            continue
        sources = _sources(install, target)
        found += [f"{_name(target)} reachable from {source} by {sorted(policies)}"
                  for source, policies in sources.items() if source not in allowed_in]
        if not gateways & set(sources):
            found.append(f"{_name(target)} is not reachable from the gateway")
    return found


@pytest.mark.parametrize("install", INSTALLS.values(), ids=INSTALLS.keys())
def test_only_the_gateway_reaches_workers_and_redis(install):
    assert reach_violations(install) == []


PLANTED = {  # a worker opened to any pod of the namespace, or to anyone at all
    "any-pod": {"ingress": [{"from": [{"podSelector": {}}]}]},
    "any-source": {"ingress": [{}]},
    "other-namespace": {"ingress": [{"from": [{"namespaceSelector": {}}]}]},
}


@pytest.mark.parametrize("rules", PLANTED.values(), ids=PLANTED.keys())
def test_a_planted_policy_that_opens_a_worker_is_caught(rules):
    planted = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "_file": "planted.yaml",
               "metadata": {"name": "planted", "namespace": "tiergate"},
               "spec": {"podSelector": {"matchLabels": {"app.kubernetes.io/component": "worker"}},
                        "policyTypes": ["Ingress"], **copy.deepcopy(rules)}}
    found = reach_violations(INSTALLS["base"] + [planted])
    assert found and all("['planted']" in line for line in found), found


@pytest.mark.parametrize("install", INSTALLS.values(), ids=INSTALLS.keys())
def test_a_default_deny_policy_and_every_selector_names_real_pods(install):
    policies = of("NetworkPolicy", install)
    assert any(p["spec"]["podSelector"] == {} and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
               and not p["spec"].get("ingress") and not p["spec"].get("egress") for p in policies)
    pod_labels = [_labels(w) for w in workloads(install)]
    for policy in policies:
        spec, name = policy["spec"], policy["metadata"]["name"]
        if spec["podSelector"]:
            assert any(_matches(spec["podSelector"], labels) for labels in pod_labels), (name, "selects no pod")
        peers = [peer for rule in spec.get("ingress", []) for peer in rule.get("from", [])]
        peers += [peer for rule in spec.get("egress", []) for peer in rule.get("to", [])]
        for peer in peers:
            if "podSelector" in peer and "namespaceSelector" not in peer:
                assert any(_matches(peer["podSelector"], labels) for labels in pod_labels), (name, peer)


@pytest.mark.parametrize("workload", [w for install in INSTALLS.values() for w in workloads(install)],
                         ids=lambda w: f"{w['_file']}:{w['metadata']['name']}")
def test_every_pod_runs_restricted_with_requests_and_limits(workload):
    pod = workload["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    for container in pod["containers"] + pod.get("initContainers", []):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
        assert context["readOnlyRootFilesystem"] is True  # what must be written has a volume of its own
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][kind]), (container["name"], kind)


def _secret_env(container: dict, name: str) -> dict | None:
    found = [e for e in container.get("env", []) if e["name"] == name]
    return found[0]["valueFrom"]["secretKeyRef"] if found else None


@pytest.mark.parametrize("name", INSTALLS.keys())
def test_redis_asks_for_the_password_from_a_secret_and_the_gateway_brings_it(name):
    install = INSTALLS[name]
    redis_sets = [w for w in workloads(install) if _labels(w).get("tiergate.dev/store") == "redis"]
    assert redis_sets
    for workload in redis_sets:
        for container in containers(workload):  # Redis and Sentinel alike
            assert _secret_env(container, "REDISCLI_AUTH") == REDIS_SECRET, container["name"]
    scripts = " ".join(str(c.get("command")) for w in redis_sets for c in containers(w))
    scripts += " ".join(str(d["data"]) for d in of("ConfigMap", install))
    assert "requirepass %s" in scripts  # written from the variable, at start
    if name != "base":  # replicas (and Sentinels) log in too
        assert "masterauth %s" in scripts
    if name == "sentinel":
        assert "sentinel auth-pass tiergate %s" in scripts
    settings = parse_config(gateway_config(install), name).redis
    (gateway,) = containers(one("Deployment", "tiergate-gateway", install))
    assert _secret_env(gateway, settings.password_env) == REDIS_SECRET
