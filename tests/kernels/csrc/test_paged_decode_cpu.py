"""The C++ paged decode attention against the torch version that copies K/V out of the pool."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels import cpu_kernels
from kernels.paged_attention import AttentionMetadata, decode_attention, gathered_decode_attention

HEADS, KV_HEADS, DIM, BLOCK, POOL = 9, 3, 64, 16, 400


def scattered_step(lengths, width, dtype, seed=0):
    """Random K/V in a pool, one query per sequence, each sequence's blocks scattered over the
    pool; tables are `width` wide, padded with block 0 past each sequence's blocks."""
    gen = torch.Generator().manual_seed(seed)
    k_cache = torch.randn(POOL, BLOCK, KV_HEADS, DIM, generator=gen).to(dtype)
    v_cache = torch.randn(POOL, BLOCK, KV_HEADS, DIM, generator=gen).to(dtype)
    order = torch.randperm(POOL, generator=gen).tolist()
    tables = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, length in enumerate(lengths):
        used = -(-length // BLOCK)
        tables[row, :used] = torch.tensor([order.pop() for _ in range(used)])
    query = torch.randn(len(lengths), HEADS, DIM, generator=gen).to(dtype)
    return query, k_cache, v_cache, tables, torch.tensor(lengths)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("window,softcap", [(None, None), (40, None), (None, 20.0), (700, 30.0)])
def test_matches_the_gathering_version(isa, dtype, window, softcap):
    # lengths from one token to many blocks, so long contexts are cut into pieces and merged
    lengths = [1, 15, 16, 17, 333, 1200, 64, 999]
    query, k_cache, v_cache, tables, lens = scattered_step(lengths, width=80, dtype=dtype)
    got = cpu_kernels.paged_decode(query, k_cache, v_cache, tables, lens, 0.125, window, softcap, isa=isa)
    want = gathered_decode_attention(query.float(), k_cache.float(), v_cache.float(), tables, lens, 0.125,
                                     window, softcap)
    assert got.dtype == dtype and got.shape == query.shape
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.float(), want, atol=tol, rtol=tol)


def test_the_torch_fallback_gives_the_same_decode(monkeypatch):
    query, k_cache, v_cache, tables, lens = scattered_step([5, 300, 47], width=20, dtype=torch.float32, seed=1)
    meta = AttentionMetadata(torch.zeros(3, dtype=torch.long), [], torch.arange(3), tables, lens)
    fused = decode_attention(query, k_cache, v_cache, meta, 0.125, None, None)
    monkeypatch.setattr(cpu_kernels, "_loaded", False)  # as on a machine with no compiler
    torch.testing.assert_close(decode_attention(query, k_cache, v_cache, meta, 0.125, None, None), fused,
                               atol=1e-5, rtol=1e-5)


def test_lengths_past_the_table_and_blocks_past_the_pool_are_refused():
    query, k_cache, v_cache, tables, lens = scattered_step([20, 30], width=2, dtype=torch.float32)
    with pytest.raises(RuntimeError, match="does not fit a block table"):
        cpu_kernels.paged_decode(query, k_cache, v_cache, tables, torch.tensor([20, 33]), 1.0, None, None)
    tables[1, 1] = POOL
    with pytest.raises(RuntimeError, match="outside the pool"):
        cpu_kernels.paged_decode(query, k_cache, v_cache, tables, lens, 1.0, None, None)


@pytest.mark.live  # a second process
def test_later_processes_load_the_built_library_without_building():
    assert cpu_kernels.available()
    script = ("import logging; logging.basicConfig(level=logging.INFO)\n"
              "from kernels import cpu_kernels\nprint(cpu_kernels.available())")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(cpu_kernels.__file__).parent.parent)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
    assert "building" not in done.stderr and "ready" in done.stderr
