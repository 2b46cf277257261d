"""Device choice, default dtype and KV sizing rules; on CPU the engine stays as it was."""
import pytest
import torch

from backends.engine.config import EngineConfig
from backends.engine.device_defaults import defaults_for
from backends.engine.model.device import (gpu_memory, kv_budget, resolve_device, resolve_dtype, tensor_bytes,
                                          zeroed_on_touch)


def test_auto_follows_torch_and_cuda_without_a_gpu_is_an_error():
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="one of"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            resolve_device("cuda")


def test_the_config_resolves_auto_once_and_takes_that_devices_defaults():
    config = EngineConfig(model="m", device="auto")
    assert config.device == resolve_device("auto").type  # every later reader sees the device, not "auto"
    defaults = defaults_for(config.device)
    assert (config.max_num_batched_tokens, config.max_num_seqs) == (defaults.max_num_batched_tokens,
                                                                    defaults.max_num_seqs)


def test_default_dtype_is_bf16_on_gpu_fp32_on_cpu_unless_named():
    assert resolve_dtype(None, torch.device("cuda")) == torch.bfloat16
    assert resolve_dtype(None, torch.device("cpu")) == torch.float32
    assert resolve_dtype("float16", torch.device("cuda")) == torch.float16


def test_kv_budget_is_the_utilized_share_less_usage_and_forward_peak():
    gib = 1 << 30
    assert kv_budget(80 * gib, 0.9, used=3 * gib, activation_peak=2 * gib) == int(72 * gib) - 5 * gib
    with pytest.raises(ValueError, match="no GPU memory left"):
        kv_budget(8 * gib, 0.5, used=3 * gib, activation_peak=2 * gib)


def test_tied_weights_count_once():
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    assert tensor_bytes([emb.weight, head.weight]) == 10 * 4 * 4


def test_gpu_memory_is_not_reported_on_cpu():
    assert gpu_memory(torch.nn.Linear(2, 2), [(torch.zeros(1), torch.zeros(1))]) is None


def test_worker_defaults_to_auto_and_reports_no_gpu_memory_on_cpu():
    from types import SimpleNamespace

    from backends.worker import build_parser
    from backends.worker_metrics import EngineCollector

    args = build_parser().parse_args(["--model", "m", "--device", "cpu"])
    assert (args.device, args.dtype, args.gpu_memory_utilization) == ("cpu", None, 0.9)
    assert build_parser().parse_args(["--model", "m"]).device == "auto"
    runner = SimpleNamespace(model=torch.nn.Linear(2, 2), kv_caches=[])
    assert list(EngineCollector(None, "m").gpu_memory_metrics(runner)) == []


def test_zeroed_on_touch_gives_writable_zeros_of_the_shape_and_dtype():
    pool = zeroed_on_touch((3, 4, 2, 8), torch.bfloat16)
    assert (pool.shape, pool.dtype) == ((3, 4, 2, 8), torch.bfloat16) and not pool.any()
    pool[1, 2] = 1.5
    assert pool.sum().item() == 1.5 * 16
