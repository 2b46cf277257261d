"""The manifests of deploy/k8s as the tests read them: the base install (the folder's own files), the
Sentinel install (the base without its single Redis and its config Secret, plus ha/) and the Cluster
install (the same, plus cluster/)."""
from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import yaml

K8S = Path(__file__).parents[2] / "deploy" / "k8s"
HA = K8S / "ha"
CLUSTER = K8S / "cluster"
NAMESPACE = "tiergate"
# the files of the base that ha/ and cluster/ replace: the single Redis and the Secret with its URL
REPLACED_BY_HA = ("redis.yaml", "config.yaml")


def load(folder: Path) -> list[dict]:
    """Every document of the folder's *.yaml files (not below it), each with its `_file`."""
    docs = []
    for path in sorted(folder.glob("*.yaml")):
        docs += [dict(d, _file=str(path.relative_to(K8S))) for d in yaml.safe_load_all(path.read_text())
                 if d is not None]
    return docs


BASE = load(K8S)
HA_DOCS = load(HA)
HA_INSTALL = [d for d in BASE if d["_file"] not in REPLACED_BY_HA] + HA_DOCS
CLUSTER_DOCS = load(CLUSTER)
CLUSTER_INSTALL = [d for d in BASE if d["_file"] not in REPLACED_BY_HA] + CLUSTER_DOCS
INSTALLS = {"base": BASE, "sentinel": HA_INSTALL, "cluster": CLUSTER_INSTALL}


def of(kind: str, docs: list[dict] = BASE) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def one(kind: str, name: str, docs: list[dict] = BASE) -> dict:
    found = [d for d in of(kind, docs) if d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return found[0]


def containers(workload: dict) -> list[dict]:
    return workload["spec"]["template"]["spec"]["containers"]


def workloads(docs: list[dict]) -> list[dict]:
    """Everything that runs pods."""
    return [d for d in docs if d["kind"] in ("Deployment", "StatefulSet", "Job")]


def container_named(workload: dict, name: str) -> dict:
    return next(c for c in containers(workload) if c["name"] == name)


def gateway_config(docs: list[dict] = BASE) -> dict:
    return yaml.safe_load(one("Secret", "tiergate-config", docs)["stringData"]["tiergate.yaml"])


def with_worker_key():
    """The shipped configs name TIERGATE_WORKER_KEY (sent to our workers) and TIERGATE_REDIS_PASSWORD,
    both from Secrets in the pods: reading them needs the variables set."""
    return mock.patch.dict(os.environ, {"TIERGATE_WORKER_KEY": "test-worker-key",
                                        "TIERGATE_REDIS_PASSWORD": "test-redis-password"})


def service_host(service: dict) -> str:
    return f"{service['metadata']['name']}.{NAMESPACE}.svc.cluster.local"


def pool_behind(service: dict, docs: list[dict] = BASE) -> dict:
    """The Deployment whose pods the Service selects."""
    return next(d for d in of("Deployment", docs)
                if service["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items())


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]
