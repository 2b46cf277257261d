"""The shipped configurations load, and the local stack launches each worker with its flags."""
from pathlib import Path

import pytest

from backends.worker import build_parser
from gateway.config import load_config
from launcher.workers import local_workers

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def worker_key(monkeypatch):
    """The shipped configs send TIERGATE_WORKER_KEY to our workers; loading them needs it set."""
    monkeypatch.setenv("TIERGATE_WORKER_KEY", "test-worker-key")


@pytest.mark.parametrize("path", ["config/tiergate.yaml", "config/examples/production-tiers.yaml",
                                  "config/examples/gpu-tiers.yaml"])
def test_config_loads(path):
    config = load_config(str(ROOT / path))
    assert [t.level for t in config.tiers] == sorted(t.level for t in config.tiers)


def test_default_stack_flags_are_valid_worker_flags():
    workers = local_workers(load_config(str(ROOT / "config/tiergate.yaml")))
    parsed = [build_parser().parse_args(["--model", model, *launch]) for model, launch in workers.values()]
    assert {"int4"} <= {p.quantization for p in parsed} and {"ngram"} <= {p.speculative for p in parsed}
    chat = [p for p in parsed if p.task == "generate"]
    assert chat and all(p.override_generation_config == {"temperature": 0.2, "top_p": 0.9} for p in chat)


def test_every_tier_on_our_workers_sends_the_worker_key():
    config = load_config(str(ROOT / "config/tiergate.yaml"))
    assert {spec.api_key for t in (*config.tiers, *config.embedding_tiers) for spec in t.workers} == {"test-worker-key"}


def test_production_example_launches_nothing_locally():
    assert local_workers(load_config(str(ROOT / "config/examples/production-tiers.yaml"))) == {}


def test_gpu_example_flags_are_valid_cuda_worker_flags():
    config = load_config(str(ROOT / "config/examples/gpu-tiers.yaml"))
    parsed = {t.name: build_parser().parse_args(["--model", t.model, *t.workers[0].launch]) for t in config.tiers}
    assert all(p.device == "cuda" for p in parsed.values())
    assert parsed["cheap"].quantization == "int4" and parsed["medium"].quantization is None
    large = parsed["large"]
    # the 70B is an AWQ folder: int4 as stored, no quantization at load
    assert (large.quantization, large.speculative, large.draft_model) == (None, "draft", "/models/llama-3.2-1b-instruct")
    assert large.model.endswith("-awq")
    assert local_workers(config) == {}  # every worker on a GPU host of its own
