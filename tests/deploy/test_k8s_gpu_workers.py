"""deploy/k8s/workers-gpu.yaml: the tiers of config/examples/gpu-tiers.yaml run on GPUs. Each pool
asks for one nvidia.com/gpu on a GPU node, runs `backends.worker` from the CUDA image with the flags
the example gives the tier (`--device cuda` first), and has minutes of start-up allowance before
liveness counts; the CPU tier stays on the CPU image. deploy/Dockerfile builds both images, the CUDA
one at the project's torch and triton pins."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from backends.worker import build_parser
from gateway.config import load_config, parse_config

from .manifests import BASE, K8S, containers, flag, gateway_config, of, one, pool_behind, with_worker_key

ROOT = K8S.parents[1]
with with_worker_key():
    GPU_EXAMPLE = load_config(str(ROOT / "config" / "examples" / "gpu-tiers.yaml"))
    DEPLOYED = {t.name: t for t in parse_config(gateway_config(BASE), "deploy/k8s/config.yaml").tiers}
CUDA_IMAGE, CPU_IMAGE = "tiergate:cuda", "tiergate:latest"
MIN_STARTUP_S = 600  # weights from a volume, int4 quantization, the KV pool's profiling run, graph capture


def _pool(tier_name: str) -> dict:
    host = urlsplit(DEPLOYED[tier_name].workers[0].url).hostname
    return pool_behind(one("Service", host.split(".")[0]))


def _gpus(container: dict) -> set:
    return {container["resources"][kind].get("nvidia.com/gpu") for kind in ("requests", "limits")}


@pytest.mark.parametrize("example", GPU_EXAMPLE.tiers, ids=lambda t: t.name)
def test_each_gpu_tier_runs_its_example_flags_on_one_gpu_from_the_cuda_image(example):
    assert DEPLOYED[example.name].model == example.model
    pool = _pool(example.name)
    (container,) = containers(pool)
    assert container["image"] == CUDA_IMAGE and _gpus(container) == {1}
    command = container["command"]
    (launch,) = {w.launch for w in example.workers}
    assert launch[:2] == ("--device", "cuda")
    assert command[:9] == ["python", "-m", "backends.worker", "--model", example.model, "--host", "0.0.0.0",
                           "--port", flag(command, "--port")] and tuple(command[9:]) == launch
    args = build_parser().parse_args(command[3:])  # the worker's own parser takes every flag and value
    assert args.device == "cuda"
    pod = pool["spec"]["template"]["spec"]
    mount = next(m for m in container["volumeMounts"] if Path(example.model).is_relative_to(m["mountPath"]))
    assert mount["readOnly"] and any(v["name"] == mount["name"] and v["persistentVolumeClaim"] for v in pod["volumes"])
    if args.draft_model:
        assert Path(args.draft_model).is_relative_to(mount["mountPath"])


@pytest.mark.parametrize("example", GPU_EXAMPLE.tiers, ids=lambda t: t.name)
def test_each_gpu_pool_lands_on_gpu_nodes_and_has_minutes_to_start(example):
    pod = _pool(example.name)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    (container,) = pod["containers"]
    probe = container["startupProbe"]
    assert probe["httpGet"] == {"path": "/health", "port": "http"} == container["readinessProbe"]["httpGet"]
    allowance = probe.get("initialDelaySeconds", 0) + probe["periodSeconds"] * probe["failureThreshold"]
    assert allowance >= MIN_STARTUP_S, (example.name, allowance)


def test_only_gpu_pools_use_the_cuda_image_and_the_cpu_tier_stays_on_cpu():
    assert {t.name for t in GPU_EXAMPLE.tiers} < set(DEPLOYED)
    for pool in of("Deployment"):
        for container in containers(pool):
            on_gpu = _gpus(container) == {1}
            assert (container["image"] == CUDA_IMAGE) == on_gpu, pool["metadata"]["name"]
            assert ("cuda" in container["command"]) == on_gpu, pool["metadata"]["name"]
    (cpu_container,) = containers(_pool("small"))
    assert cpu_container["image"] == CPU_IMAGE and _gpus(cpu_container) == {None}


def _stages(dockerfile: str) -> list[tuple[str, str]]:
    """(base image, stage name) of each FROM, in order."""
    return re.findall(r"^FROM (\S+) AS (\S+)$", dockerfile, re.MULTILINE)


def _pin(name: str) -> str:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in dependencies if d.startswith(f"{name}==")]
    return pin


def test_dockerfile_builds_the_cpu_image_by_default_and_a_cuda_target_at_the_project_pins():
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    stages = _stages(dockerfile)
    assert [name for _, name in stages] == ["cuda", "cpu"]  # the last stage is what a plain build gives
    assert stages[0][0].startswith("nvidia/cuda:")
    cuda_stage, cpu_stage = dockerfile.split("AS cpu")
    for stage in (cuda_stage, cpu_stage):
        assert f'"{_pin("torch")}"' in stage
    assert "--override deploy/cuda-overrides.txt" in cuda_stage
    overrides = (ROOT / "deploy" / "cuda-overrides.txt").read_text().splitlines()
    assert [line for line in overrides if line and not line.startswith("#")] == [_pin("triton")]
