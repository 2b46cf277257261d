"""The KV block pool: allocation on demand, ref-counted prefix sharing, LRU reuse.

A full block is identified by a chained hash (parent block's hash + its token ids), so a
hash names the whole prefix up to that block. Freed blocks keep their hash and stay
findable until the pool needs them again, oldest first (the free queue is the LRU).
A hit also compares token ids, so a hash collision can never serve wrong K/V.
A request's cache salt (SamplingParams.cache_salt: the gateway's, one per tenant) seeds its chain
and is kept on each block it fills: requests with different salts never share a block, so one
tenant's time to first token says nothing of what another sent.
"""
from __future__ import annotations

from collections import OrderedDict

from .sequence import Sequence


class Block:
    __slots__ = ("block_id", "ref_count", "hash", "token_ids", "salt")

    def __init__(self, block_id: int):
        self.block_id = block_id
        self.ref_count = 0
        self.hash: int | None = None
        self.token_ids: tuple[int, ...] | None = None
        self.salt: str | None = None


def chain_hash(parent: int | str | None, token_ids: tuple[int, ...]) -> int:
    """`parent`: the previous block's hash; for a first block, the request's cache salt (or None)."""
    return hash((parent, token_ids))


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_queue: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))  # front = evict first
        self.cached: dict[int, int] = {}  # chained hash -> block id
        self.block_hashes: dict[int, list[int]] = {}  # seq id -> hashes of its full, computed blocks
        self.prefix_query_tokens = 0
        self.prefix_hit_tokens = 0

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_queue)

    def usage(self) -> float:
        return 1.0 - self.num_free_blocks / self.num_blocks

    def _take_free_block(self) -> int:
        block_id, _ = self.free_queue.popitem(last=False)
        block = self.blocks[block_id]
        if block.hash is not None and self.cached.get(block.hash) == block_id:
            del self.cached[block.hash]  # evicting the least recently used cached block
        block.hash, block.token_ids, block.salt, block.ref_count = None, None, None, 1
        return block_id

    def _block_tokens(self, seq: Sequence, index: int) -> tuple[int, ...]:
        return tuple(seq.token_ids[index * self.block_size:(index + 1) * self.block_size])

    def match_prefix(self, seq: Sequence) -> int:
        """On admission, share the cached blocks of seq's leading full blocks. At least one
        token is always left to compute, since its logits give the next token."""
        assert not seq.block_table, "match_prefix runs only on a sequence holding no blocks"
        hashes: list[int] = []
        if self.enable_prefix_caching:
            salt = seq.params.cache_salt
            parent = salt
            for index in range((seq.num_tokens - 1) // self.block_size):
                tokens = self._block_tokens(seq, index)
                h = chain_hash(parent, tokens)
                block_id = self.cached.get(h)
                if block_id is None or self.blocks[block_id].token_ids != tokens or self.blocks[block_id].salt != salt:
                    break
                block = self.blocks[block_id]
                if block.ref_count == 0:
                    del self.free_queue[block_id]
                block.ref_count += 1
                seq.block_table.append(block_id)
                hashes.append(h)
                parent = h
        self.block_hashes[seq.seq_id] = hashes
        seq.num_computed_tokens = seq.num_cached_tokens = len(hashes) * self.block_size
        return seq.num_computed_tokens

    def record_prefix_query(self, seq: Sequence) -> None:
        self.prefix_query_tokens += seq.num_tokens
        self.prefix_hit_tokens += seq.num_cached_tokens

    def blocks_needed(self, seq: Sequence, num_new_tokens: int) -> int:
        total = seq.num_computed_tokens + num_new_tokens
        return max(0, -(-total // self.block_size) - len(seq.block_table))

    def allocate(self, seq: Sequence, num_new_tokens: int, keep_free: int = 0) -> bool:
        """Make seq's block table cover `num_new_tokens` more tokens, or change nothing."""
        needed = self.blocks_needed(seq, num_new_tokens)
        if needed > self.num_free_blocks - keep_free:
            return False
        seq.block_table.extend(self._take_free_block() for _ in range(needed))
        return True

    def commit_full_blocks(self, seq: Sequence) -> None:
        """Register blocks that have just become full and computed, so later requests can share them."""
        if not self.enable_prefix_caching:
            return
        hashes = self.block_hashes.setdefault(seq.seq_id, [])
        salt = seq.params.cache_salt
        for index in range(len(hashes), seq.num_computed_tokens // self.block_size):
            tokens = self._block_tokens(seq, index)
            h = chain_hash(hashes[-1] if hashes else salt, tokens)
            block = self.blocks[seq.block_table[index]]
            if block.hash is None:
                block.hash, block.token_ids, block.salt = h, tokens, salt
                self.cached.setdefault(h, block.block_id)
            hashes.append(h)

    def free(self, seq: Sequence) -> None:
        """Release seq's blocks. Blocks that hold a cached prefix go to the back of the LRU
        queue (reused last); blocks without one go to the front (reused first)."""
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.free_queue[block_id] = None
                if block.hash is None:
                    self.free_queue.move_to_end(block_id, last=False)
        seq.block_table = []
        seq.num_computed_tokens = 0
        self.block_hashes.pop(seq.seq_id, None)
