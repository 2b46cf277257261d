"""Paged attention against a dense reference; sampling filters and seeds."""
import math
import random

import torch

from kernels.paged_attention import AttentionMetadata, GatherWorkspace, PrefillChunk, paged_attention
from kernels.sampling import RowParams, probabilities, sample

from .attention_reference import dense_reference


def test_paged_attention_matches_dense_with_gqa_window_and_scattered_blocks():
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


def test_top_k_and_top_p_restrict_the_support():
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0]] * 3)
    params = RowParams.build([1.0] * 3, [2, 0, 0], [1.0, 0.5, 1.0], [None] * 3, logits.device)
    probs = probabilities(logits, params)
    assert (probs[0, 2:] == 0).all() and probs[0, :2].sum().item() == 1.0
    assert probs[1, 0] > 0 and (probs[1, 1:] == 0).all()  # top token alone holds > 50%
    assert torch.allclose(probs[2], logits[2].softmax(-1))  # a row asking for neither keeps every token


def test_greedy_rows_and_seeded_rows():
    logits = torch.randn(3, 50)

    def params():
        return RowParams.build([0.0, 1.0, 1.0], [0] * 3, [1.0] * 3,
                               [None, torch.Generator().manual_seed(5), torch.Generator().manual_seed(6)], logits.device)

    a, b = sample(logits, params()), sample(logits, params())
    assert a[0] == logits[0].argmax() and a.tolist() == b.tolist()
