"""What differs per device is decided in one table (engine/device_defaults.py) and where the plan is
chosen (engine/model/plans.py); the runner, the engine and the loaders read those, never the device
type. Quantization stands alone (it imports no other part of the engine), so it picks each layer's
kernel from where that layer's weights lie."""
from __future__ import annotations

import ast
from pathlib import Path

import torch

from backends.engine.device_defaults import DEFAULTS, DeviceDefaults
from backends.engine.model.plans import choose_plan
from backends.engine.config import EngineConfig
from tests.support.cuda_stand_ins import cuda_plan_on_cpu

ENGINE = Path(__file__).resolve().parents[3] / "backends" / "engine"
DECIDERS = {ENGINE / "device_defaults.py", ENGINE / "model" / "plans.py"}
STANDALONE = ENGINE / "quant"


def device_tests(source: str) -> list[int]:
    """Lines that read a device's type (`<...>device.type`, `.is_cuda`) other than to look it up in
    the table (`defaults_for(<...>.type)`)."""
    tree = ast.parse(source)
    looked_up = {id(call.args[0]) for call in ast.walk(tree) if isinstance(call, ast.Call)
                 and getattr(call.func, "id", None) == "defaults_for" and call.args}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in looked_up:
            continue
        owner = node.value
        owner_name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if (node.attr == "type" and owner_name.endswith("device")) or node.attr == "is_cuda":
            found.append(node.lineno)
    return sorted(found)


def test_only_the_table_and_the_plans_test_the_device_type():
    offenders = {}
    for path in ENGINE.rglob("*.py"):
        if path in DECIDERS or STANDALONE in path.parents:
            continue
        if lines := device_tests(path.read_text()):
            offenders[path.relative_to(ENGINE).as_posix()] = lines
    assert offenders == {}


def test_the_scan_finds_a_planted_device_test():
    assert device_tests("if self.device.type == 'cpu':\n    pass\nx = t.is_cuda\n") == [1, 3]
    assert device_tests("defaults_for(model.device.type).dtype\n") == []


def test_every_device_declares_what_it_does_and_each_plan_carries_its_devices_answers():
    assert set(DEFAULTS) == {"cpu", "cuda"} and all(isinstance(d, DeviceDefaults) for d in DEFAULTS.values())
    config = EngineConfig(model="m")
    cpu_plan = choose_plan(config, torch.device("cpu"))
    assert cpu_plan.defaults == DEFAULTS["cpu"] and cpu_plan.defaults.host_kernels
    # the CUDA plan, run on CPU tensors under tests, still answers as CUDA does
    cuda_plan = cuda_plan_on_cpu(config)
    assert cuda_plan.defaults == DEFAULTS["cuda"]
    assert not (cuda_plan.defaults.host_kernels or cuda_plan.defaults.narrow_kv_pool)
