"""Paged attention in torch (decode steps on the CPU call the C++ kernel of cpu_kernels.py).

K/V of every layer live in a fixed pool of blocks, `[num_blocks, block_size, kv_heads,
head_dim]`. One model forward carries a flat batch of tokens from many sequences; each
sequence contributes either one decode token or a chunk of its prompt. The new tokens'
K/V are written into the pool by slot index, then each query attends over its own
sequence's blocks (block table) up to its position, optionally within a sliding window.

Grouped-query attention never expands K/V: the `g` query heads that share a KV head are
folded into the query axis, so one SDPA call covers them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from . import cpu_kernels


@dataclass
class PrefillChunk:
    """A run of `end - start` query tokens of one sequence inside the flat batch."""
    start: int
    end: int
    context_len: int  # tokens of this sequence with K/V after this step (cached + new)
    block_table: torch.Tensor  # [num_blocks_of_seq] long
    masks: dict = field(default_factory=dict)  # built once per step, shared by all layers


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [num_tokens] long: pool slot of each new token
    prefills: list[PrefillChunk]
    decode_index: torch.Tensor  # [num_decodes] long: flat-batch index of each decode token
    decode_block_tables: torch.Tensor  # [num_decodes, max_blocks] long (padded with 0)
    decode_context_lens: torch.Tensor  # [num_decodes] long
    workspace: "GatherWorkspace | None" = None
    decode_masks: dict = field(default_factory=dict)  # sliding window -> mask, shared by all layers
    derived: dict = field(default_factory=dict)  # other kernels' per-step tensors, built once for all layers

    def to(self, device: torch.device) -> "AttentionMetadata":
        """The same step with its tensors on `device` (built on the host, moved once per step)."""
        move = lambda t: t.to(device, non_blocking=True)  # noqa: E731
        prefills = [PrefillChunk(c.start, c.end, c.context_len, move(c.block_table)) for c in self.prefills]
        return AttentionMetadata(move(self.slot_mapping), prefills, move(self.decode_index),
                                 move(self.decode_block_tables), move(self.decode_context_lens))


class GatherWorkspace:
    """Grow-only scratch buffers for gathered K/V, reused by every layer and step.

    Gathering into a fresh tensor costs more than the copy itself on CPU: each large allocation
    is a new mmap that page-faults on first touch (docs/engine-cpu.md)."""

    def __init__(self):
        self._buffers: dict[str, torch.Tensor] = {}

    def gather(self, name: str, cache: torch.Tensor, block_ids: torch.Tensor) -> torch.Tensor:
        shape = (block_ids.numel(),) + tuple(cache.shape[1:])
        buf = self._buffers.get(name)
        if buf is None or buf.shape[0] < shape[0] or buf.dtype != cache.dtype or buf.shape[1:] != shape[1:]:
            buf = torch.empty((max(shape[0], 64),) + shape[1:], dtype=cache.dtype)
            self._buffers[name] = buf
        out = buf[: shape[0]]
        torch.index_select(cache, 0, block_ids, out=out)
        return out


def write_kv(k_cache: torch.Tensor, v_cache: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             slot_mapping: torch.Tensor) -> None:
    """key/value: [num_tokens, kv_heads, head_dim] stored at their slots."""
    kv_heads, head_dim = key.shape[1], key.shape[2]
    # the pool may be narrower than the model (a bf16 pool under fp32: device.resolve_kv_dtype)
    k_cache.view(-1, kv_heads, head_dim).index_copy_(0, slot_mapping, key.to(k_cache.dtype))
    v_cache.view(-1, kv_heads, head_dim).index_copy_(0, slot_mapping, value.to(v_cache.dtype))


def gather_blocks(cache: torch.Tensor, block_table: torch.Tensor, length: int,
                  workspace: GatherWorkspace | None = None, name: str = "k") -> torch.Tensor:
    """The first `length` tokens of one sequence: [length, kv_heads, head_dim]."""
    num_blocks = (length + cache.shape[1] - 1) // cache.shape[1]
    ids = block_table[:num_blocks]
    blocks = workspace.gather(name, cache, ids) if workspace else cache.index_select(0, ids)
    return blocks.view(-1, cache.shape[2], cache.shape[3])[:length]


def _additive(visible: torch.Tensor) -> torch.Tensor:
    """SDPA on CPU runs faster with an additive float mask than with a boolean one (docs/engine-cpu.md)."""
    return torch.zeros(visible.shape).masked_fill_(~visible, float("-inf"))


def _window_mask(query_pos: torch.Tensor, key_len: int, sliding_window: int | None) -> torch.Tensor:
    """Boolean [num_queries, key_len]: True where the key is visible to the query."""
    key_pos = torch.arange(key_len)
    visible = key_pos[None, :] <= query_pos[:, None]
    if sliding_window is not None:
        visible &= key_pos[None, :] > (query_pos[:, None] - sliding_window)
    return visible


def _prefill_mask(chunk: PrefillChunk, n: int, group: int, sliding_window: int | None, first: int,
                  last: int) -> torch.Tensor:
    """Queries first..last - 1 of the chunk's n, against the keys up to the last one's position."""
    key = (group, sliding_window, first, last)
    if key not in chunk.masks:
        query_pos = torch.arange(chunk.context_len - n + first, chunk.context_len - n + last)
        visible = _window_mask(query_pos, chunk.context_len - n + last, sliding_window)
        chunk.masks[key] = _additive(visible.repeat(group, 1))
    return chunk.masks[key]


def _decode_mask(meta: "AttentionMetadata", max_len: int, sliding_window: int | None) -> torch.Tensor:
    if sliding_window not in meta.decode_masks:
        key_pos = torch.arange(max_len)[None, :]
        lens = meta.decode_context_lens[:, None]
        visible = key_pos < lens
        if sliding_window is not None:
            visible &= key_pos > (lens - 1 - sliding_window)
        meta.decode_masks[sliding_window] = _additive(visible[:, None, None, :])
    return meta.decode_masks[sliding_window]


def _grouped_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                  scale: float, causal: bool, softcap: float | None) -> torch.Tensor:
    """q: [B, Hkv, g*n, D] (query heads folded into queries), k/v: [B, Hkv, L, D]."""
    if softcap is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale)
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    scores = torch.tanh(scores / softcap) * softcap
    if mask is not None:
        scores = scores + mask
    return torch.matmul(torch.softmax(scores, dim=-1), v)


# On CPU a long chunk's queries go in blocks of this many, each against the keys up to its last
# query only: causal attention then skips most of the masked half (docs/engine-cpu.md).
PREFILL_QUERY_BLOCK = 128


def _prefill(q, k_new, v_new, k_cache, v_cache, chunk: PrefillChunk, workspace, scale, sliding_window, softcap):
    """q: [n, Hq, D]; returns [n, Hq, D]."""
    n = q.shape[0]
    if chunk.context_len == n:  # nothing cached before this chunk: attend to the new K/V directly
        k, v = k_new, v_new
    else:
        k = gather_blocks(k_cache, chunk.block_table, chunk.context_len, workspace, "k").to(q.dtype)
        v = gather_blocks(v_cache, chunk.block_table, chunk.context_len, workspace, "v").to(q.dtype)
    if q.device.type != "cpu" or n <= PREFILL_QUERY_BLOCK:
        return _prefill_queries(q, k, v, chunk, 0, n, scale, sliding_window, softcap)
    return torch.cat([_prefill_queries(q, k, v, chunk, first, min(n, first + PREFILL_QUERY_BLOCK), scale,
                                       sliding_window, softcap) for first in range(0, n, PREFILL_QUERY_BLOCK)])


def _prefill_queries(q, k, v, chunk: PrefillChunk, first: int, last: int, scale, sliding_window, softcap):
    """Queries first..last - 1 of the chunk's q [n, Hq, D], against k/v [context_len, Hkv, D]; -> [last - first, Hq, D]."""
    n, num_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    group, queries, keys = num_heads // kv_heads, last - first, chunk.context_len - n + last
    # [queries, Hq, D] -> [Hkv, g*queries, D] with query heads of one KV head laid out group-major.
    qg = q[first:last].reshape(queries, kv_heads, group, head_dim).permute(1, 2, 0, 3)
    qg = qg.reshape(kv_heads, group * queries, head_dim)
    causal_only = queries == n == chunk.context_len and group == 1 and sliding_window is None and softcap is None
    mask = None if causal_only else _prefill_mask(chunk, n, group, sliding_window, first, last)
    out = _grouped_sdpa(qg[None], k[:keys].transpose(0, 1)[None], v[:keys].transpose(0, 1)[None], mask, scale,
                        causal_only, softcap)
    return out[0].view(kv_heads, group, queries, head_dim).permute(2, 0, 1, 3).reshape(queries, num_heads, head_dim)


def decode_attention(q, k_cache, v_cache, meta: AttentionMetadata, scale, sliding_window, softcap):
    """q: [B, Hq, D] one query per sequence; returns [B, Hq, D]."""
    if q.device.type == "cpu" and cpu_kernels.available():  # reads K/V in place, no copy
        return cpu_kernels.paged_decode(q, k_cache, v_cache, meta.decode_block_tables, meta.decode_context_lens,
                                        scale, sliding_window, softcap)
    batch, num_heads, head_dim = q.shape
    kv_heads = k_cache.shape[2]
    group = num_heads // kv_heads
    max_len = int(meta.decode_context_lens.max())
    block_size = k_cache.shape[1]
    num_blocks = (max_len + block_size - 1) // block_size
    ids = meta.decode_block_tables[:, :num_blocks].reshape(-1)
    workspace = meta.workspace or GatherWorkspace()
    k = workspace.gather("k", k_cache, ids).view(batch, -1, kv_heads, head_dim)[:, :max_len].transpose(1, 2).to(q.dtype)
    v = workspace.gather("v", v_cache, ids).view(batch, -1, kv_heads, head_dim)[:, :max_len].transpose(1, 2).to(q.dtype)
    qg = q.reshape(batch, kv_heads, group, head_dim)
    # one sequence sees all of its keys (no padding) unless a window hides some
    mask = None if batch == 1 and sliding_window is None else _decode_mask(meta, max_len, sliding_window)
    out = _grouped_sdpa(qg, k, v, mask, scale, False, softcap)
    return out.reshape(batch, num_heads, head_dim)


def paged_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata,
                    scale: float, sliding_window: int | None = None,
                    softcap: float | None = None) -> torch.Tensor:
    """query: [T, Hq, D], key/value: [T, Hkv, D] for the T new tokens; returns [T, Hq, D]."""
    write_kv(k_cache, v_cache, key, value, meta.slot_mapping)
    out = torch.empty_like(query)
    for chunk in meta.prefills:
        sl = slice(chunk.start, chunk.end)
        out[sl] = _prefill(query[sl], key[sl], value[sl], k_cache, v_cache, chunk, meta.workspace,
                           scale, sliding_window, softcap)
    if meta.decode_index.numel():
        out[meta.decode_index] = decode_attention(query[meta.decode_index], k_cache, v_cache, meta, scale,
                                                  sliding_window, softcap)
    return out


def static_decode_attention(q, k_new, v_new, k_cache, v_cache, slot_mapping, block_tables, context_lens,
                            scale, sliding_window, softcap):
    """Decode attention with no data-dependent shape, for compiled steps. q: [B, Hq, D],
    k_new/v_new: [B, Hkv, D] written at their slots first; returns [B, Hq, D]."""
    write_kv(k_cache, v_cache, k_new, v_new, slot_mapping)
    if q.device.type == "cpu" and cpu_kernels.available():
        return cpu_kernels.paged_decode(q, k_cache, v_cache, block_tables, context_lens, scale, sliding_window,
                                        softcap)
    return gathered_decode_attention(q, k_cache, v_cache, block_tables, context_lens, scale, sliding_window, softcap)


def gathered_decode_attention(q, k_cache, v_cache, block_tables, context_lens, scale, sliding_window, softcap):
    """The torch reference: every block of the (padded) table is copied out and keys past each
    sequence's length are masked."""
    batch, num_heads, head_dim = q.shape
    kv_heads = k_cache.shape[2]
    keys = k_cache[block_tables].view(batch, -1, kv_heads, head_dim).to(q.dtype)
    values = v_cache[block_tables].view(batch, -1, kv_heads, head_dim).to(q.dtype)
    scores = torch.einsum("bhgd,blhd->bhgl", q.view(batch, kv_heads, -1, head_dim), keys) * scale
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    key_pos = torch.arange(keys.shape[1], device=q.device)[None, :]
    visible = key_pos < context_lens[:, None]
    if sliding_window is not None:
        visible = visible & (key_pos >= context_lens[:, None] - sliding_window)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    out = torch.einsum("bhgl,blhd->bhgd", torch.softmax(scores, dim=-1), values)
    return out.reshape(batch, num_heads, head_dim)
