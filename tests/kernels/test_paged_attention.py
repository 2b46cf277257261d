"""Paged attention (kernels/paged_attention.py) against a dense reference."""
import importlib
import math
import random

import pytest
import torch

from kernels.paged_attention import AttentionMetadata, GatherWorkspace, PrefillChunk, paged_attention

from tests.kernels.attention_reference import dense_reference


@pytest.mark.parametrize("query_block", [None, 4])
def test_paged_attention_matches_dense_with_gqa_window_and_scattered_blocks(monkeypatch, query_block):
    """query_block 4: prompt chunks attend in blocks of 4 queries, each against its own keys only."""
    if query_block:
        # the module, not the function that kernels/__init__ exports under the same name
        monkeypatch.setattr(importlib.import_module("kernels.paged_attention"), "PREFILL_QUERY_BLOCK", query_block)
    torch.manual_seed(0)
    rng = random.Random(0)
    heads, kv_heads, dim, bs, num_blocks = 6, 2, 8, 4, 64
    scale = 1 / math.sqrt(dim)
    for window in (None, 5):
        k_cache = torch.zeros(num_blocks, bs, kv_heads, dim)
        v_cache = torch.zeros_like(k_cache)
        free = list(range(num_blocks))
        rng.shuffle(free)
        # three sequences: a fresh prompt, a chunk on top of cached context, and a decode
        specs = [(0, 9), (7, 6), (13, 1)]  # (already cached tokens, new tokens)
        contexts, tables, queries, news = [], [], [], []
        for cached, new in specs:
            length = cached + new
            table = [free.pop() for _ in range(-(-length // bs))]
            k, v = torch.randn(length, kv_heads, dim), torch.randn(length, kv_heads, dim)
            for p in range(cached):  # the cached part is already in the pool
                k_cache[table[p // bs], p % bs], v_cache[table[p // bs], p % bs] = k[p], v[p]
            contexts.append((k, v))
            tables.append(table)
            queries.append(torch.randn(new, heads, dim))
            news.append((cached, new))
        slots, prefills, offset = [], [], 0
        for (cached, new), table in zip(news, tables):
            slots += [table[p // bs] * bs + p % bs for p in range(cached, cached + new)]
            if new > 1:
                prefills.append(PrefillChunk(offset, offset + new, cached + new, torch.tensor(table)))
            offset += new
        meta = AttentionMetadata(torch.tensor(slots), prefills, decode_index=torch.tensor([offset - 1]),
                                 decode_block_tables=torch.tensor([tables[2]]),
                                 decode_context_lens=torch.tensor([news[2][0] + 1]), workspace=GatherWorkspace())
        q = torch.cat(queries)
        k_new = torch.cat([k[c:] for (k, _), (c, _) in zip(contexts, news)])
        v_new = torch.cat([v[c:] for (_, v), (c, _) in zip(contexts, news)])
        out = paged_attention(q, k_new, v_new, k_cache, v_cache, meta, scale, sliding_window=window)
        offset = 0
        for (k, v), query in zip(contexts, queries):
            expected = dense_reference(query, k, v, scale, window)
            torch.testing.assert_close(out[offset:offset + len(query)], expected, atol=1e-5, rtol=1e-5)
            offset += len(query)
