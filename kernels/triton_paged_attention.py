"""Paged attention in Triton, the GPU counterpart of kernels/paged_attention.py.

Same cache layout and metadata: K/V pools `[num_blocks, block_size, kv_heads, head_dim]`,
the new tokens' K/V written by slot first, then every query attends over its sequence's
blocks. Each program reads K/V straight from the pool through the block table, one tile of
BLOCK_N positions at a time (positions map to blocks per key, so BLOCK_N need not equal the
block size), with an online softmax; nothing is gathered into a contiguous copy.

Grouped-query attention: one program serves all `group` query heads of one KV head, folded
into the rows of its tile, so each K/V tile is loaded once per group, not once per head.

Two launches share one inner loop (`_attend_rows`):
- decode: one program per (sequence, KV head), a single query position per sequence;
- prefill: one program per (chunk, tile of BLOCK_Q query tokens, KV head); a chunk's queries
  sit at the end of its context (cached prefix plus the chunk), attending causally.

Rows that attend to nothing (padding rows, padded decode slots with context length 0, as a
CUDA graph replays them) produce zeros instead of NaN.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .paged_attention import AttentionMetadata, write_kv

BLOCK_N = 64  # key positions per tile
PREFILL_ROWS = 64  # query rows (tokens x grouped heads) per prefill program
MIN_DOT = 16  # tl.dot needs every dimension >= 16 on GPUs


@triton.jit
def _tanh(x):
    # exp-based so it compiles on every backend and the interpreter alike; stable for large |x|
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def _attend_rows(q_ptr, out_ptr, k_cache, v_cache, table_ptr, token, head, q_pos, row_ok, kv_head, lo, hi,
                 stride_qt, stride_qh, stride_ot, stride_oh, stride_block, stride_slot, stride_head,
                 scale, softcap, window,
                 M: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                 HEAD_DIM: tl.constexpr, USE_WINDOW: tl.constexpr, USE_SOFTCAP: tl.constexpr,
                 PRECISION: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """Rows are (query token, query head) pairs at absolute position q_pos; keys lo..hi-1."""
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    q_mask = row_ok[:, None] & d_ok[None, :]
    q_off = token.to(tl.int64)[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(q_ptr + q_off, mask=q_mask, other=0.0).to(DOT_DTYPE)
    m_i = tl.full([M], float("-inf"), tl.float32)
    l_i = tl.zeros([M], tl.float32)
    acc = tl.zeros([M, BLOCK_D], tl.float32)
    for start in range(lo, hi, BLOCK_N):
        k_pos = start + tl.arange(0, BLOCK_N)
        k_ok = k_pos < hi
        block = tl.load(table_ptr + k_pos // BLOCK_SIZE, mask=k_ok, other=0).to(tl.int64)
        kv_off = block * stride_block + (k_pos % BLOCK_SIZE) * stride_slot + kv_head * stride_head
        kv_mask = k_ok[:, None] & d_ok[None, :]
        k = tl.load(k_cache + kv_off[:, None] + offs_d[None, :], mask=kv_mask, other=0.0).to(DOT_DTYPE)
        v = tl.load(v_cache + kv_off[:, None] + offs_d[None, :], mask=kv_mask, other=0.0).to(DOT_DTYPE)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale
        if USE_SOFTCAP:
            s = softcap * _tanh(s / softcap)
        visible = row_ok[:, None] & k_ok[None, :] & (k_pos[None, :] <= q_pos[:, None])
        if USE_WINDOW:
            visible &= k_pos[None, :] > q_pos[:, None] - window
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing visible yet
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v, input_precision=PRECISION)
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_off = token.to(tl.int64)[:, None] * stride_ot + head[:, None] * stride_oh + offs_d[None, :]
    tl.store(out_ptr + o_off, out.to(out_ptr.dtype.element_ty), mask=q_mask)


@triton.jit
def _decode_kernel(q_ptr, out_ptr, k_cache, v_cache, decode_index, block_tables, context_lens,
                   stride_qt, stride_qh, stride_ot, stride_oh, stride_block, stride_slot, stride_head,
                   stride_table, scale, softcap, window, group,
                   GROUP_PAD: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_D: tl.constexpr, HEAD_DIM: tl.constexpr, USE_WINDOW: tl.constexpr,
                   USE_SOFTCAP: tl.constexpr, PRECISION: tl.constexpr, DOT_DTYPE: tl.constexpr):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    context_len = tl.load(context_lens + seq).to(tl.int32)
    rows = tl.arange(0, GROUP_PAD)
    q_pos = tl.zeros([GROUP_PAD], tl.int32) + context_len - 1
    row_ok = rows < group  # a padded slot (context 0) runs no tile and stores zeros
    token = tl.zeros([GROUP_PAD], tl.int32) + tl.load(decode_index + seq).to(tl.int32)
    lo = 0
    if USE_WINDOW:
        lo = tl.maximum(context_len - window, 0)
    _attend_rows(q_ptr, out_ptr, k_cache, v_cache, block_tables + seq.to(tl.int64) * stride_table,
                 token, kv_head * group + rows, q_pos, row_ok, kv_head, lo, context_len,
                 stride_qt, stride_qh, stride_ot, stride_oh, stride_block, stride_slot, stride_head,
                 scale, softcap, window, GROUP_PAD, BLOCK_SIZE, BLOCK_N, BLOCK_D, HEAD_DIM,
                 USE_WINDOW, USE_SOFTCAP, PRECISION, DOT_DTYPE)


@triton.jit
def _prefill_kernel(q_ptr, out_ptr, k_cache, v_cache, starts, lengths, context_lens, block_tables,
                    stride_qt, stride_qh, stride_ot, stride_oh, stride_block, stride_slot, stride_head,
                    stride_table, scale, softcap, window, group,
                    BLOCK_Q: tl.constexpr, GROUP_PAD: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, HEAD_DIM: tl.constexpr,
                    USE_WINDOW: tl.constexpr, USE_SOFTCAP: tl.constexpr, PRECISION: tl.constexpr,
                    DOT_DTYPE: tl.constexpr):
    chunk = tl.program_id(0)
    first = tl.program_id(1) * BLOCK_Q  # first query of this tile, counted within the chunk
    kv_head = tl.program_id(2)
    length = tl.load(lengths + chunk).to(tl.int32)
    if first < length:  # the grid covers the longest chunk; shorter ones leave programs idle
        context_len = tl.load(context_lens + chunk).to(tl.int32)
        rows = tl.arange(0, BLOCK_Q * GROUP_PAD)
        t = first + rows // GROUP_PAD
        g = rows % GROUP_PAD
        row_ok = (t < length) & (g < group)
        first_pos = context_len - length + first
        q_pos = first_pos + rows // GROUP_PAD
        lo = 0
        if USE_WINDOW:
            lo = tl.maximum(first_pos - window + 1, 0)
        hi = tl.minimum(context_len, first_pos + BLOCK_Q)
        _attend_rows(q_ptr, out_ptr, k_cache, v_cache, block_tables + chunk.to(tl.int64) * stride_table,
                     tl.load(starts + chunk).to(tl.int32) + t, kv_head * group + g, q_pos, row_ok, kv_head, lo, hi,
                     stride_qt, stride_qh, stride_ot, stride_oh, stride_block, stride_slot, stride_head,
                     scale, softcap, window, BLOCK_Q * GROUP_PAD, BLOCK_SIZE, BLOCK_N, BLOCK_D, HEAD_DIM,
                     USE_WINDOW, USE_SOFTCAP, PRECISION, DOT_DTYPE)


def _shape_args(query: torch.Tensor, out: torch.Tensor, k_cache: torch.Tensor, sliding_window, softcap) -> dict:
    """Strides and compile-time switches shared by both launches."""
    assert k_cache.stride(-1) == 1 and query.stride(-1) == 1 and out.stride(-1) == 1
    head_dim = query.shape[-1]
    return dict(
        stride_qt=query.stride(0), stride_qh=query.stride(1), stride_ot=out.stride(0), stride_oh=out.stride(1),
        stride_block=k_cache.stride(0), stride_slot=k_cache.stride(1), stride_head=k_cache.stride(2),
        softcap=float(softcap or 1.0), window=int(sliding_window or 0),
        group=query.shape[1] // k_cache.shape[2],
        BLOCK_SIZE=k_cache.shape[1], BLOCK_N=BLOCK_N, BLOCK_D=max(MIN_DOT, triton.next_power_of_2(head_dim)),
        HEAD_DIM=head_dim, USE_WINDOW=sliding_window is not None, USE_SOFTCAP=softcap is not None,
        PRECISION="ieee" if query.dtype == torch.float32 else "tf32",  # fp32 stays exact, like the torch path
        DOT_DTYPE=_dot_dtype(query.dtype),
    )


def _dot_dtype(dtype: torch.dtype):
    """Tensor cores take bf16/fp16 operands as they are. Triton's interpreter multiplies bf16
    as raw uint16 bits (triton 3.9), so there the operands go up to fp32 first."""
    if dtype == torch.float32 or triton.knobs.runtime.interpret:
        return tl.float32
    return {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}[dtype]


def paged_decode(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, out: torch.Tensor,
                 decode_index: torch.Tensor, block_tables: torch.Tensor, context_lens: torch.Tensor,
                 scale: float, sliding_window: int | None = None, softcap: float | None = None) -> None:
    """out[decode_index[i]] = attention of query[decode_index[i]] over its sequence's first
    context_lens[i] cached tokens. Fixed-shape inputs, so a CUDA graph can replay it."""
    args = _shape_args(query, out, k_cache, sliding_window, softcap)
    group_pad = max(MIN_DOT, triton.next_power_of_2(args["group"]))
    grid = (decode_index.shape[0], k_cache.shape[2])
    _decode_kernel[grid](query, out, k_cache, v_cache, decode_index, block_tables, context_lens,
                         stride_table=block_tables.stride(0), scale=scale, GROUP_PAD=group_pad, **args)


def paged_prefill(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, out: torch.Tensor,
                  starts: torch.Tensor, lengths: torch.Tensor, context_lens: torch.Tensor,
                  block_tables: torch.Tensor, max_length: int, scale: float,
                  sliding_window: int | None = None, softcap: float | None = None) -> None:
    """Chunk i: queries query[starts[i] : starts[i] + lengths[i]] at the last lengths[i]
    positions of a context of context_lens[i] tokens, already all in the pool."""
    args = _shape_args(query, out, k_cache, sliding_window, softcap)
    group_pad = triton.next_power_of_2(args["group"])
    block_q = max(MIN_DOT // group_pad, PREFILL_ROWS // group_pad, 1)
    grid = (starts.shape[0], triton.cdiv(max_length, block_q), k_cache.shape[2])
    _prefill_kernel[grid](query, out, k_cache, v_cache, starts, lengths, context_lens, block_tables,
                          stride_table=block_tables.stride(0), scale=scale, BLOCK_Q=block_q,
                          GROUP_PAD=group_pad, **args)


def _packed_prefills(meta: AttentionMetadata, device: torch.device) -> tuple[torch.Tensor, ...]:
    """The chunks as four tensors on `device`, built once per step and shared by all layers."""
    if "triton_prefills" not in meta.derived:
        chunks = meta.prefills
        width = max(len(c.block_table) for c in chunks)
        tables = torch.zeros(len(chunks), width, dtype=torch.int32)
        for i, c in enumerate(chunks):
            tables[i, :len(c.block_table)] = c.block_table
        columns = torch.tensor([(c.start, c.end - c.start, c.context_len) for c in chunks], dtype=torch.int32)
        meta.derived["triton_prefills"] = (*columns.t().contiguous().to(device), tables.to(device),
                                           int(columns[:, 1].max()))
    return meta.derived["triton_prefills"]


def triton_paged_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                           k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata,
                           scale: float, sliding_window: int | None = None,
                           softcap: float | None = None) -> torch.Tensor:
    """Drop-in for kernels.paged_attention.paged_attention; all tensors on one device."""
    write_kv(k_cache, v_cache, key, value, meta.slot_mapping)
    out = torch.empty_like(query)
    if meta.prefills:
        starts, lengths, context_lens, tables, longest = _packed_prefills(meta, query.device)
        paged_prefill(query, k_cache, v_cache, out, starts, lengths, context_lens, tables, longest, scale,
                      sliding_window, softcap)
    if meta.decode_index.numel():
        paged_decode(query, k_cache, v_cache, out, meta.decode_index, meta.decode_block_tables,
                     meta.decode_context_lens, scale, sliding_window, softcap)
    return out
