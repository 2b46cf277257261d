"""deploy/k8s: every manifest (ha/ too) validates against the Kubernetes schemas offline
(kubernetes-validate, strict), has the fields Kubernetes requires, and fits together:
selectors match pods, Services reach named ports, probes hit /health, the Secret's gateway
config (tenants and the admin key hash) passes the gateway's own validation and points each tier
at a Service in these manifests (or at the external vLLM endpoint), the usage log is on a volume
claim, Redis (the single pod and the Sentinel set) persists (appendonly + PVC) and refuses writes
when full rather than evicting, and file bodies live on a volume every gateway replica shares.
The Sentinel set is in test_k8s_sentinel.py, the GPU workers in test_k8s_gpu_workers.py."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import kubernetes_validate
import pytest

from gateway.config import parse_config
from gateway.server.exposure import INSECURE_FLAG, refusal
from gateway.quality.config import QualityConfig
from webwire.internal_key import WORKER_KEY_ENV

from .manifests import (BASE, CLUSTER_DOCS, HA_DOCS, INSTALLS, K8S, NAMESPACE, container_named, containers,
                        gateway_config, of, one, service_host)

API_VERSIONS = {"Namespace": "v1", "ConfigMap": "v1", "Secret": "v1", "PersistentVolumeClaim": "v1", "Service": "v1",
                "Deployment": "apps/v1", "StatefulSet": "apps/v1", "HorizontalPodAutoscaler": "autoscaling/v2",
                "PodDisruptionBudget": "policy/v1", "Job": "batch/v1", "NetworkPolicy": "networking.k8s.io/v1"}
EXTERNAL_VLLM_HOST = "vllm-router.vllm.svc.cluster.local"
# the Kubernetes release whose schemas the manifests must pass (kubernetes-validate ships them)
SCHEMA_VERSION = "1.37.0"
EVERY_DOC = BASE + HA_DOCS + CLUSTER_DOCS


def _id(doc: dict) -> str:
    return f"{doc['_file']}:{doc['kind']}/{doc['metadata']['name']}"


def test_every_manifest_file_is_read():
    assert {str(p.relative_to(K8S)) for p in K8S.rglob("*.yaml")} == {d["_file"] for d in EVERY_DOC}


@pytest.mark.parametrize("doc", EVERY_DOC, ids=_id)
def test_every_document_validates_against_the_kubernetes_schemas(doc):
    """Strict: an unknown field (a typo, a field at the wrong level) fails as a wrong type does."""
    resource = {key: value for key, value in doc.items() if key != "_file"}
    assert kubernetes_validate.validate(resource, SCHEMA_VERSION, strict=True) == "1.37"


@pytest.mark.parametrize("install", INSTALLS.values(), ids=INSTALLS.keys())
def test_every_document_has_kind_api_version_and_metadata(install):
    assert {d["_file"] for d in install} >= {"namespace.yaml", "gateway.yaml", "workers.yaml", "workers-gpu.yaml"}
    seen = set()
    for doc in install:
        assert doc["apiVersion"] == API_VERSIONS[doc["kind"]], (doc["_file"], doc["kind"])
        name = doc["metadata"]["name"]
        assert name and len(name) <= 63 and name == name.lower()
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == NAMESPACE, (doc["_file"], name)
        assert (doc["kind"], name) not in seen, f"duplicate {doc['kind']} {name}"
        seen.add((doc["kind"], name))


@pytest.mark.parametrize("workload", of("Deployment", EVERY_DOC) + of("StatefulSet", EVERY_DOC), ids=_id)
def test_workloads_select_their_pods_and_set_resources(workload):
    spec = workload["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert spec["replicas"] >= 1
    for container in containers(workload):
        assert container["image"] and container["name"]
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][kind]), (container["name"], kind)
        assert container["readinessProbe"] and container["livenessProbe"]


@pytest.mark.parametrize("service", of("Service", EVERY_DOC), ids=_id)
def test_services_reach_a_named_container_port(service):
    selector = service["spec"]["selector"]
    targets = [w for w in of("Deployment", EVERY_DOC) + of("StatefulSet", EVERY_DOC)
               if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()]
    assert targets, f"service {service['metadata']['name']} selects no pods"
    ports = {p["name"]: p["containerPort"] for w in targets for c in containers(w) for p in c["ports"]}
    for port in service["spec"]["ports"]:
        assert port["targetPort"] in ports or port["targetPort"] in ports.values()


def test_gateway_and_workers_probe_health_on_their_http_port():
    http_workloads = [d for d in of("Deployment") if d["metadata"]["labels"]["app.kubernetes.io/component"]
                      in ("gateway", "worker")]
    assert len(http_workloads) >= 2
    for workload in http_workloads:
        for container in containers(workload):
            port_names = {p["name"] for p in container["ports"]}
            for probe in ("readinessProbe", "livenessProbe"):
                get = container[probe]["httpGet"]
                assert get["path"] == "/health" and get["port"] in port_names, (workload["metadata"]["name"], probe)


def test_gateway_deployment_runs_replicas_with_the_config_secret_and_an_hpa():
    gateway = one("Deployment", "tiergate-gateway")
    assert gateway["spec"]["replicas"] >= 2
    (container,) = containers(gateway)
    command = container["command"]
    assert command[:3] == ["python", "-m", "gateway"]
    config_path = Path(command[command.index("--config") + 1])
    mount = next(m for m in container["volumeMounts"] if Path(m["mountPath"]) == config_path.parent)
    volume = next(v for v in gateway["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    assert config_path.name in one("Secret", volume["secret"]["secretName"])["stringData"]
    assert int(command[command.index("--port") + 1]) == container["ports"][0]["containerPort"]
    hpa = one("HorizontalPodAutoscaler", "tiergate-gateway")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "tiergate-gateway"}
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]


def test_configmap_gateway_config_is_valid_and_points_at_these_services():
    doc = gateway_config()
    config = parse_config(doc, "deploy/k8s/config.yaml")
    assert len(config.tiers) == 5
    assert "quality" in doc and config.quality == QualityConfig()  # on, with the documented defaults
    services = {service_host(s): {p["port"] for p in s["spec"]["ports"]} for s in of("Service")}
    external = []
    for tier in config.tiers:
        for worker in tier.workers:
            url = urlsplit(worker.url)
            if url.hostname == EXTERNAL_VLLM_HOST:
                external.append(tier.name)
            else:
                assert url.port in services[url.hostname], (tier.name, worker.url)
    assert external == ["expert"]  # the top tier runs on the vLLM cluster
    redis_url = urlsplit(config.redis.url)
    assert redis_url.scheme == "redis" and redis_url.port in services[redis_url.hostname]


def test_each_self_hosted_tier_has_a_worker_pool_running_backends_worker():
    config = parse_config(gateway_config(), "deploy/k8s/config.yaml")
    (gateway,) = containers(one("Deployment", "tiergate-gateway"))
    for tier in config.tiers:
        url = urlsplit(tier.workers[0].url)
        if url.hostname == EXTERNAL_VLLM_HOST:
            continue
        service = one("Service", url.hostname.split(".")[0])
        pool = next(d for d in of("Deployment") if service["spec"]["selector"].items()
                    <= d["spec"]["template"]["metadata"]["labels"].items())
        (container,) = containers(pool)
        command = container["command"]
        assert command[:3] == ["python", "-m", "backends.worker"]
        assert command[command.index("--model") + 1] == tier.model
        assert int(command[command.index("--port") + 1]) == url.port == container["ports"][0]["containerPort"]
        # the worker listens on 0.0.0.0 with the key the gateway sends it, both from one Secret
        assert tier.workers[0].api_key_env == WORKER_KEY_ENV
        assert _env_from_secret(container, WORKER_KEY_ENV) == _env_from_secret(gateway, WORKER_KEY_ENV)


def _env_from_secret(container: dict, name: str) -> dict:
    """The secretKeyRef a container's variable is read from (never optional: no Secret, no start)."""
    ref = next(e for e in container["env"] if e["name"] == name)["valueFrom"]["secretKeyRef"]
    assert not ref.get("optional")
    return ref


# the single Redis, the Sentinel set and the Cluster
REDIS_SETS = [(BASE, "tiergate-redis"), (HA_DOCS, "tiergate-redis-ha"), (CLUSTER_DOCS, "tiergate-redis-cluster")]


@pytest.mark.parametrize(("docs", "name"), REDIS_SETS, ids=["single", "sentinel", "cluster"])
def test_redis_persists_with_appendonly_on_a_volume_claim(docs, name):
    redis = one("StatefulSet", name, docs)
    container = container_named(redis, "redis")
    args = container["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    data_dir = args[args.index("--dir") + 1]
    (claim,) = redis["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"]
    assert any(m["name"] == claim["metadata"]["name"] and m["mountPath"] == data_dir
               for m in container["volumeMounts"])
    assert one("Service", redis["spec"]["serviceName"], docs)["spec"]["clusterIP"] == "None"


def _bytes(size: str) -> int:
    units = {"mb": 1 << 20, "gb": 1 << 30, "Mi": 1 << 20, "Gi": 1 << 30}
    unit = next(u for u in units if size.endswith(u))
    return int(size[:-len(unit)]) * units[unit]


def _gateway_claim_at(path: str) -> tuple[dict, dict]:
    """The gateway container's mount at `path` and the PersistentVolumeClaim behind it."""
    gateway = one("Deployment", "tiergate-gateway")
    (container,) = containers(gateway)
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == path)
    volume = next(v for v in gateway["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    return mount, one("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])


@pytest.mark.parametrize(("docs", "name"), REDIS_SETS, ids=["single", "sentinel", "cluster"])
def test_redis_refuses_writes_below_its_memory_limit_instead_of_evicting(docs, name):
    container = container_named(one("StatefulSet", name, docs), "redis")
    args = container["args"]
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"
    assert _bytes(args[args.index("--maxmemory") + 1]) < _bytes(container["resources"]["limits"]["memory"])


def test_file_bodies_live_on_a_volume_every_gateway_replica_mounts():
    config = parse_config(gateway_config(), "deploy/k8s/config.yaml")
    mount, claim = _gateway_claim_at(config.batches.files_dir)
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"] and not mount.get("readOnly")


def test_gateway_is_closed_by_default_and_keeps_its_usage_log():
    """Tenants and the admin key hash come with the Secret, so the gateway (on 0.0.0.0 in its pod)
    starts without --insecure-open; the usage log, the ledger's source of truth, is on a claim."""
    config = parse_config(gateway_config(), "deploy/k8s/config.yaml")
    assert config.policies.tenants and config.policies.admin_key_sha256
    gateway = one("Deployment", "tiergate-gateway")
    (container,) = containers(gateway)
    command = container["command"]
    assert INSECURE_FLAG not in command and refusal(command[command.index("--host") + 1], config, False) is None
    _, claim = _gateway_claim_at(config.policies.usage_log.dir)
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # every replica writes its own file there
