"""The fused Triton kernels (kernels/triton_fused.py) and their torch reference set against HF's
own Llama modules and functions, on random inputs with odd widths (in Triton's interpreter on
CPU, compiled where there is a GPU: tests/kernels/device.py)."""
from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb

from kernels import fused_reference, triton_fused
from tests.kernels.device import DEVICE

KERNEL_SETS = [pytest.param(triton_fused, id="triton"), pytest.param(fused_reference, id="torch")]
# bf16: a few units in the last place (8e-3): Triton's interpreter rounds bf16 toward zero, a GPU to nearest
DTYPES = [pytest.param(torch.float32, {"rtol": 1e-5, "atol": 1e-5}, id="fp32"),
          pytest.param(torch.bfloat16, {"rtol": 3e-2, "atol": 1e-2}, id="bf16")]


def _norm(width: int, dtype: torch.dtype) -> LlamaRMSNorm:
    norm = LlamaRMSNorm(width, eps=1e-5)
    norm.weight.data = torch.randn(width)
    return norm.to(DEVICE, dtype)


@pytest.mark.parametrize("ops", KERNEL_SETS)
@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("width", [64, 72, 333])
def test_rms_norm_and_residual_add_match_hf(ops, dtype, tol, width):
    torch.manual_seed(width)
    norm = _norm(width, dtype)
    x, residual = (torch.randn(5, width, device=DEVICE) * 3).to(dtype), torch.randn(5, width, device=DEVICE).to(dtype)
    with torch.inference_mode():
        torch.testing.assert_close(ops.rms_norm(x, norm.weight, norm.variance_epsilon), norm(x), **tol)
        out, new_residual = ops.add_rms_norm(x, residual, norm.weight, norm.variance_epsilon)
        # fp32: the same add as HF's, bit for bit
        torch.testing.assert_close(new_residual, residual + x, **(tol if dtype != torch.float32 else {"rtol": 0, "atol": 0}))
        torch.testing.assert_close(out, norm(residual + x), **tol)
        # rows that are a strided view (a slice of a wider tensor) are read through their stride
        wide = torch.randn(5, width + 7, device=DEVICE).to(dtype)
        torch.testing.assert_close(ops.rms_norm(wide[:, :width], norm.weight, 1e-5), norm(wide[:, :width]), **tol)


@pytest.mark.parametrize("ops", KERNEL_SETS)
@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("intermediate", [48, 1500])  # past one program's columns, not a power of two
def test_silu_and_mul_on_merged_gate_up_matches_hf_mlp(ops, dtype, tol, intermediate):
    torch.manual_seed(intermediate)
    config = LlamaConfig(hidden_size=40, num_attention_heads=4, intermediate_size=intermediate, hidden_act="silu")
    mlp = LlamaMLP(config).to(DEVICE, dtype)
    x = torch.randn(3, 40, device=DEVICE).to(dtype)
    with torch.inference_mode():
        merged = torch.cat([mlp.gate_proj(x), mlp.up_proj(x)], dim=-1)
        torch.testing.assert_close(mlp.down_proj(ops.silu_and_mul(merged)), mlp(x), **tol)
        expected = mlp.act_fn(mlp.gate_proj(x)) * mlp.up_proj(x)
        torch.testing.assert_close(ops.silu_and_mul(merged), expected, **tol)


@pytest.mark.parametrize("ops", KERNEL_SETS)
@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("head_dim", [64, 24])
def test_rotary_on_split_qkv_views_matches_hf_apply_rotary_pos_emb(ops, dtype, tol, head_dim):
    torch.manual_seed(head_dim)
    q_heads, k_heads, tokens = 6, 2, 7
    config = LlamaConfig(hidden_size=q_heads * head_dim, num_attention_heads=q_heads, num_key_value_heads=k_heads,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    rope = LlamaRotaryEmbedding(config).to(DEVICE)
    positions = torch.tensor([[0, 1, 2, 9, 40, 41, 300]], device=DEVICE)
    # q, k as views into one merged qkv output, as a fused attention module splits it
    qkv = torch.randn(1, tokens, (q_heads + 2 * k_heads) * head_dim, device=DEVICE).to(dtype)
    q = qkv[..., :q_heads * head_dim].view(1, tokens, q_heads, head_dim)
    k = qkv[..., q_heads * head_dim:(q_heads + k_heads) * head_dim].view(1, tokens, k_heads, head_dim)
    cos, sin = rope(qkv, positions)
    with torch.inference_mode():
        want_q, want_k = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        got_q, got_k = ops.rotary(q, k, cos, sin)
    assert got_q.shape == q.shape and got_k.shape == k.shape
    torch.testing.assert_close(got_q.transpose(1, 2), want_q, **tol)
    torch.testing.assert_close(got_k.transpose(1, 2), want_k, **tol)
