"""Attention the plain way, for checking the paged kernels: dense, causal, optionally windowed."""
import torch


def dense_reference(q, k, v, scale, window):
    """q [n, Hq, D] for the last n positions of a context of k/v [L, Hkv, D]."""
    n, heads, _ = q.shape
    length, kv_heads, _ = k.shape
    k = k.repeat_interleave(heads // kv_heads, dim=1)
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    qpos = torch.arange(length - n, length)[:, None]
    kpos = torch.arange(length)[None, :]
    visible = kpos <= qpos
    if window:
        visible &= kpos > qpos - window
    scores = scores.masked_fill(~visible, float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)
