"""The Triton paged-attention kernels against the torch reference (in Triton's interpreter
on CPU, or compiled where there is a GPU: tests/kernels/device.py).

Each case is one mixed step as the engine builds it: prompt chunks (some on top of cached
context), decodes, blocks scattered through the pool, ragged lengths; both kernels run in
every case, and the pools must come out identical too (same K/V writes).
"""
from __future__ import annotations

import math
import random

import pytest
import torch

from kernels.paged_attention import AttentionMetadata, PrefillChunk, paged_attention
from kernels.triton_paged_attention import paged_decode, triton_paged_attention
from tests.kernels.device import DEVICE


def make_step(rng: random.Random, specs, kv_heads, head_dim, block_size, dtype):
    """specs: (cached tokens, new tokens) per sequence; new == 1 is a decode.
    Returns (k_new, v_new, k_cache, v_cache, meta) with the cached K/V already in the pool."""
    num_blocks = sum(-(-(c + n) // block_size) for c, n in specs) + 3  # spare blocks stay unused
    k_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim).to(dtype)  # junk where unwritten
    v_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim).to(dtype)
    free = list(range(num_blocks))
    rng.shuffle(free)
    slots, prefills, decode_index, decode_tables, decode_lens, offset = [], [], [], [], [], 0
    for cached, new in specs:
        length = cached + new
        table = [free.pop() for _ in range(-(-length // block_size))]
        slots += [table[p // block_size] * block_size + p % block_size for p in range(cached, length)]
        if new == 1:
            decode_index.append(offset)
            decode_tables.append(table)
            decode_lens.append(length)
        else:
            prefills.append(PrefillChunk(offset, offset + new, length, torch.tensor(table)))
        offset += new
    width = max((len(t) for t in decode_tables), default=0)
    meta = AttentionMetadata(torch.tensor(slots), prefills, torch.tensor(decode_index, dtype=torch.long),
                             torch.tensor([t + [0] * (width - len(t)) for t in decode_tables], dtype=torch.long),
                             torch.tensor(decode_lens, dtype=torch.long))
    k_new = torch.randn(offset, kv_heads, head_dim).to(dtype)
    v_new = torch.randn(offset, kv_heads, head_dim).to(dtype)
    return k_new, v_new, k_cache, v_cache, meta


def check(specs, heads=4, kv_heads=2, head_dim=16, block_size=4, window=None, softcap=None,
          dtype=torch.float32, tolerance=2e-5, seed=0):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    k_new, v_new, k_cache, v_cache, meta = make_step(rng, specs, kv_heads, head_dim, block_size, dtype)
    query = torch.randn(k_new.shape[0], heads, head_dim).to(dtype)
    scale = 1 / math.sqrt(head_dim)
    k_ref, v_ref = k_cache.float(), v_cache.float()  # copies unless fp32: clone to keep the pools apart
    k_ref, v_ref = k_ref.clone(), v_ref.clone()
    expected = paged_attention(query.float(), k_new.float(), v_new.float(), k_ref, v_ref, meta, scale, window, softcap)
    k_cache, v_cache = k_cache.to(DEVICE), v_cache.to(DEVICE)
    got = triton_paged_attention(query.to(DEVICE), k_new.to(DEVICE), v_new.to(DEVICE), k_cache, v_cache,
                                 meta.to(DEVICE), scale, window, softcap)
    torch.testing.assert_close(got.cpu().float(), expected, atol=tolerance, rtol=tolerance)
    assert torch.equal(k_cache.cpu().float(), k_ref) and torch.equal(v_cache.cpu().float(), v_ref)


MIXED = [(0, 9), (7, 6), (13, 1), (2, 1), (30, 1)]  # fresh prompt, chunk on cached context, decodes


@pytest.mark.parametrize("block_size", [1, 4, 5, 16, 32])
def test_block_sizes(block_size):
    check(MIXED, block_size=block_size)


@pytest.mark.parametrize("heads,kv_heads", [(2, 2), (4, 1), (6, 2), (8, 2), (16, 2)])
def test_grouped_query_attention(heads, kv_heads):
    check(MIXED, heads=heads, kv_heads=kv_heads)


@pytest.mark.parametrize("head_dim", [8, 24, 64, 80])
def test_head_dims_including_ones_that_are_not_powers_of_two(head_dim):
    check(MIXED, head_dim=head_dim)


@pytest.mark.parametrize("window", [1, 3, 8, 64])
def test_sliding_windows_shorter_and_longer_than_a_tile(window):
    check([(0, 70), (90, 20), (150, 1), (5, 1)], window=window, block_size=8)


@pytest.mark.parametrize("softcap", [0.5, 3.0, 50.0])
def test_softcap(softcap):
    check(MIXED, softcap=softcap)


def test_softcap_window_and_gqa_together():
    check([(40, 33), (0, 2), (100, 1)], heads=6, kv_heads=2, head_dim=24, block_size=16, window=20, softcap=2.0)


def test_long_ragged_contexts_span_many_tiles():
    check([(200, 1), (1, 1), (63, 1), (64, 1), (0, 150), (129, 70)], block_size=16, seed=3)


def test_only_decodes_and_only_prefills():
    check([(10, 1), (0, 1), (33, 1)])
    check([(0, 5), (6, 12)])


@pytest.mark.parametrize("seed", range(6))
def test_random_steps(seed):
    rng = random.Random(100 + seed)
    specs = [(rng.choice([0, rng.randrange(1, 90)]), rng.choice([1, 1, rng.randrange(2, 40)]))
             for _ in range(rng.randrange(1, 6))]
    kv_heads = rng.choice([1, 2])
    check(specs, heads=kv_heads * rng.choice([1, 2, 3, 4]), kv_heads=kv_heads, head_dim=rng.choice([8, 16, 32]),
          block_size=rng.choice([2, 4, 16]), window=rng.choice([None, rng.randrange(1, 50)]),
          softcap=rng.choice([None, 5.0]), seed=seed)


def test_bf16_pools_within_bf16_rounding():
    check(MIXED, dtype=torch.bfloat16, tolerance=2e-2)


def test_padded_decode_slots_write_zeros_and_leave_other_rows_alone():
    """A CUDA graph replays decode at a bucket's batch size; its padding slots have context 0."""
    torch.manual_seed(0)
    k_cache, v_cache = torch.randn(4, 4, 1, 16, device=DEVICE), torch.randn(4, 4, 1, 16, device=DEVICE)
    query = torch.randn(3, 2, 16, device=DEVICE)
    out = torch.full_like(query, 7.0)
    paged_decode(query, k_cache, v_cache, out, torch.tensor([0, 2], device=DEVICE),
                 torch.zeros(2, 1, dtype=torch.long, device=DEVICE), torch.tensor([0, 0], device=DEVICE), 0.25)
    out = out.cpu()
    assert (out[[0, 2]] == 0).all() and (out[1] == 7.0).all()
