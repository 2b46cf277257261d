"""A model too large for the GPU is refused before loading, by a message that names what it needs
and what the GPU has (engine/model/gpu_fit.py); the worker exits on it with that one line. The CUDA
memory query is a stand-in here, so all of it runs on CPU."""
from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from backends import worker
from backends.engine.model.device import DoesNotFit
from backends.engine.model.gpu_fit import GIB, check_weights_fit, load_fitting, safetensors_shapes, weight_need

CUDA = torch.device("cuda")
SEVENTY_B = {"model.embed_tokens.weight": [128256, 8192], "lm_head.weight": [128256, 8192],
             "model.norm.weight": [8192],
             **{f"model.layers.{i}.{name}.weight": shape for i in range(80) for name, shape in (
                 ("self_attn.q_proj", [8192, 8192]), ("self_attn.k_proj", [1024, 8192]),
                 ("self_attn.v_proj", [1024, 8192]), ("self_attn.o_proj", [8192, 8192]),
                 ("mlp.gate_proj", [28672, 8192]), ("mlp.up_proj", [28672, 8192]), ("mlp.down_proj", [8192, 28672]),
                 ("input_layernorm", [8192]), ("post_attention_layernorm", [8192]))}}


def gpu(free_gib: float, total_gib: float = 80.0):
    return lambda device: (int(free_gib * GIB), int(total_gib * GIB))


def test_a_70b_in_bf16_is_refused_naming_both_figures():
    need = weight_need(SEVENTY_B, torch.bfloat16)
    assert 70.5e9 < need.parameters < 70.6e9 and need.load_bytes == need.parameters * 2
    with pytest.raises(DoesNotFit) as refused:
        check_weights_fit(need, 0.9, CUDA, gpu(79.0))
    message = str(refused.value)
    assert "model weights need 131.4 GiB" in message and "GPU has 71.0 GiB free at gpu_memory_utilization=0.9" in message
    assert "\n" not in message


def test_int4_is_counted_but_the_load_still_needs_the_dense_size():
    need = weight_need(SEVENTY_B, torch.bfloat16, "int4", 32)
    # decoder projections at 0.5 + 4/32 bytes a weight, the untied head int8, the embedding bf16
    assert 42 * GIB < need.served_bytes < 43 * GIB < need.load_bytes
    with pytest.raises(DoesNotFit, match=r"before int4 quantization brings them to 42\.8 GiB"):
        check_weights_fit(need, 0.9, CUDA, gpu(79.0))
    check_weights_fit(weight_need(SEVENTY_B, torch.bfloat16), 0.95, CUDA, gpu(141.0, 141.0))  # an H200


def test_the_estimate_reads_a_saved_checkpoint_and_the_check_runs_before_loading(tmp_path):
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    model = LlamaForCausalLM(config)
    model.save_pretrained(tmp_path)
    shapes = safetensors_shapes(tmp_path)
    assert sum(torch.Size(s).numel() for s in shapes.values()) == sum(p.numel() for p in model.parameters())
    need = weight_need(shapes, torch.bfloat16)
    with pytest.raises(DoesNotFit, match=r"model weights need 0\.0 GiB .* GPU has 0\.0 GiB free"):
        load_fitting(tmp_path, torch.bfloat16, CUDA, utilization=0.5, mem_get_info=gpu(need.load_bytes / GIB, 1e-6))


def test_the_worker_exits_with_the_one_line(monkeypatch):
    def too_big(*args, **kwargs):
        raise DoesNotFit("model weights need 38.2 GiB but the GPU has 24.0 GiB free at gpu_memory_utilization=0.9")

    monkeypatch.setattr(worker, "build_app", too_big)
    with pytest.raises(SystemExit) as exited:
        worker.main(["--model", "m", "--device", "cpu"])
    assert exited.value.code == "tiergate worker: model weights need 38.2 GiB but the GPU has 24.0 GiB free " \
                                "at gpu_memory_utilization=0.9"


def test_an_int4_folders_packed_tensors_count_as_stored():
    shapes = {"model.layers.0.mlp.up_proj.qweight": [64, 16], "model.layers.0.mlp.up_proj.scales": [2, 128],
              "model.norm.weight": [64]}
    packed = {"model.layers.0.mlp.up_proj.qweight": 64 * 16 * 4}  # int32 words hold 8 codes each
    need = weight_need(shapes, torch.bfloat16, "int4", 32, packed)
    assert need.load_bytes == need.served_bytes == 64 * 16 * 4 + (2 * 128 + 64) * 2
    assert "quantization" not in need.describe()  # nothing is quantized after such a load
