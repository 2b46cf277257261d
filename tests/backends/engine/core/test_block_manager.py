"""The paged KV pool (engine/core/block_manager.py): prefix sharing by hash with reference counts,
eviction order, and all-or-nothing allocation."""
from backends.engine.core.block_manager import BlockManager
from backends.engine.core.sequence import SamplingParams, Sequence


def computed(bm: BlockManager, seq: Sequence) -> Sequence:
    """Pretend a forward pass computed everything the sequence has."""
    assert bm.allocate(seq, seq.num_tokens - seq.num_computed_tokens)
    seq.num_computed_tokens = seq.num_tokens
    bm.commit_full_blocks(seq)
    return seq


def test_shared_prefix_reuses_blocks_with_ref_counts():
    bm = BlockManager(num_blocks=16, block_size=4)
    a = computed(bm, Sequence(list(range(10)), SamplingParams()))
    b = Sequence(list(range(8)) + [99, 98, 97], SamplingParams())
    assert bm.match_prefix(b) == 8  # two full blocks shared
    assert b.block_table[:2] == a.block_table[:2]
    assert [bm.blocks[i].ref_count for i in a.block_table[:2]] == [2, 2]
    bm.free(a)
    assert [bm.blocks[i].ref_count for i in b.block_table[:2]] == [1, 1]


def test_whole_prompt_hit_still_leaves_one_token_to_compute():
    bm = BlockManager(num_blocks=8, block_size=4)
    computed(bm, Sequence(list(range(8)), SamplingParams()))
    again = Sequence(list(range(8)), SamplingParams())
    assert bm.match_prefix(again) == 4


def test_freed_cached_blocks_are_evicted_lru_and_uncached_first():
    bm = BlockManager(num_blocks=4, block_size=2)
    old = computed(bm, Sequence([1, 2, 3], SamplingParams()))  # one full cached block, one partial
    bm.free(old)
    # the partial (unhashed) block is reused first; the cached prefix survives
    taker = Sequence([7, 7], SamplingParams())
    assert bm.allocate(taker, 2)
    assert bm.match_prefix(Sequence([1, 2, 9], SamplingParams())) == 2
    assert bm.num_free_blocks == 2


def test_hash_collision_never_serves_wrong_tokens():
    bm = BlockManager(num_blocks=8, block_size=2)
    a = computed(bm, Sequence([1, 2, 3], SamplingParams()))
    fake_hash = bm.block_hashes[a.seq_id][0]
    b = Sequence([5, 6, 7], SamplingParams())
    import backends.engine.core.block_manager as module
    original = module.chain_hash
    module.chain_hash = lambda parent, tokens: fake_hash  # every block "collides"
    try:
        assert bm.match_prefix(b) == 0
    finally:
        module.chain_hash = original


def test_allocation_is_all_or_nothing():
    bm = BlockManager(num_blocks=3, block_size=2)
    seq = Sequence(list(range(10)), SamplingParams())
    assert not bm.allocate(seq, 10)
    assert seq.block_table == [] and bm.num_free_blocks == 3


def test_requests_with_different_cache_salts_never_share_blocks():
    bm = BlockManager(num_blocks=32, block_size=4)
    first = computed(bm, Sequence(list(range(13)), SamplingParams(cache_salt="tenant-a")))
    for salt in ("tenant-b", None):
        other = Sequence(list(range(13)), SamplingParams(cache_salt=salt))
        assert bm.match_prefix(other) == 0
        computed(bm, other)
        assert not set(other.block_table) & set(first.block_table)
    same = Sequence(list(range(13)), SamplingParams(cache_salt="tenant-a"))
    assert bm.match_prefix(same) == 12  # the same salt shares as before
    assert same.block_table == first.block_table[:3]


def test_a_salted_block_is_not_served_on_a_hash_collision():
    bm = BlockManager(num_blocks=8, block_size=4)
    a = computed(bm, Sequence(list(range(5)), SamplingParams(cache_salt="tenant-a")))
    block = bm.blocks[a.block_table[0]]
    bm.cached[hash(("tenant-b", block.token_ids))] = block.block_id  # as if tenant-b's chain hashed the same
    assert bm.match_prefix(Sequence(list(range(5)), SamplingParams(cache_salt="tenant-b"))) == 0
