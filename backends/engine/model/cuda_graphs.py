"""CUDA graphs for decode steps: one graph per batch-size bucket, replayed on static buffers.

A decode step's shapes depend only on its batch size, so the forward is captured once per
bucket (1, 2, 4, 8, 16, 32, 64, ... up to max_num_seqs) and a step of b sequences replays the
smallest bucket >= b. The graph reads its inputs from static device buffers (input ids,
positions, slot mapping, block tables, context lengths) sized for the largest bucket; before
a replay the step's metadata is copied into their first b rows and rows b..bucket-1 are set
to padding:
- slot -> the scratch block, one block past what the block manager hands out, so a padded
  token's K/V write never lands in a real sequence's block;
- context length 0 -> the Triton decode kernel reads no K/V and writes zeros (the torch
  reference gives NaN there); either way those rows' logits are dropped;
- token id 0 at position 0, block table rows pointing at the scratch block.

Which steps: only pure decode steps (every scheduled sequence feeds one token and no draft
tokens). Prefill chunks and speculative verification (several tokens per sequence) run
eagerly, as do batches above the largest bucket. Grammars, penalties and sampling run after
the graph on the same device (engine/core/sampler.py), so they do not force eager mode; draft
models stay eager.

The persistent batch: a pure decode step that runs the same sequences in the same order as the
buffers' last step, one position further, is not rebuilt from the host's lists. Its input ids
are that step's sampled ids, still on the device (`carry`); positions and context lengths go up
by one in place; only a new block's table entry is written; slots are gathered from the table.
Any other step (batch or order changed, prompt chunks, drafts) refills the buffers from the host.
This is what lets the engine launch a step before the host has seen the last one's tokens.

On CPU (only when asked for: `padded_decode=True`) the same static-buffer path runs eagerly,
so bucketing, padding and the scratch block are tested without a GPU
(tests/backends/engine/model/test_cuda_graphs.py); the capture-and-replay logic runs on CPU too, with
the capture itself stood in for (engine/model/plans.py, tests/backends/engine/model/test_plans.py).
"""
from __future__ import annotations

from collections import Counter

import torch

from kernels.paged_attention import AttentionMetadata


def capture_cuda_graph(forward, pool, device: torch.device):
    """forward() recorded as a CUDA graph: (replay, output, memory pool). A warm-up run on a side
    stream first (Triton compiles, the allocator settles); it recomputes the current step, so
    its K/V writes are the same values again."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        forward()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        output = forward()
    return graph.replay, output, graph.pool()


def decode_buckets(max_batch: int) -> list[int]:
    """Powers of two below max_batch, then max_batch itself: padding wastes < half a bucket."""
    buckets = [1]
    while buckets[-1] * 2 < max_batch:
        buckets.append(buckets[-1] * 2)
    if buckets[-1] < max_batch:
        buckets.append(max_batch)
    return buckets


class DecodeGraphRunner:
    def __init__(self, runner, max_batch: int, max_blocks_per_seq: int, scratch_block: int, capture=None):
        """`runner` is the ModelRunner; its pool has `scratch_block` reserved for padding.
        `capture` (capture_cuda_graph or a stand-in) records graphs; None runs the buffers eagerly."""
        self.runner = runner
        self.buckets = decode_buckets(max_batch)
        self.scratch_block = scratch_block
        self.scratch_slot = scratch_block * runner.block_size
        size, device = self.buckets[-1], runner.device
        self.input_ids = torch.zeros(1, size, dtype=torch.long, device=device)
        self.positions = torch.zeros(1, size, dtype=torch.long, device=device)
        self.slot_mapping = torch.full((size,), self.scratch_slot, dtype=torch.long, device=device)
        self.block_tables = torch.full((size, max_blocks_per_seq), scratch_block, dtype=torch.long, device=device)
        self.context_lens = torch.zeros(size, dtype=torch.long, device=device)
        self.decode_index = torch.arange(size, device=device)  # decode i is flat token i
        self.capture = capture
        self.graphs: dict[int, tuple] = {}  # bucket -> (replay, its static output)
        self.pool = None  # one memory pool shared by every bucket's graph
        self.steps = Counter()  # bucket -> steps run through it (logs and tests)
        # the persistent batch: the sequences whose last step the buffers hold, the position each
        # row fed, the block-table entries written per row, and that step's sampled ids
        self.batch, self.fed_positions, self.row_blocks, self.carried = [], [], [], None
        self.refills = Counter()  # True: rebuilt from the host's lists; False: continued in place
        self.block_writes = 0  # block-table entries written by continuing steps

    def accepts(self, scheduled, drafts) -> bool:
        return (not drafts and len(scheduled) <= self.buckets[-1]
                and all(n == 1 for _, n in scheduled))

    def run(self, scheduled, ahead: bool = False):
        """The same (logits, rows) as ModelRunner.forward, for a pure decode step. `ahead`: the
        host has not yet appended the last step's tokens; the step must continue that batch."""
        seqs = [seq for seq, _ in scheduled]
        continuing = self._continues(seqs, ahead)
        if ahead and not continuing:
            raise RuntimeError("a step run ahead must continue the previous decode batch")
        self.batch = []  # the buffers hold no step until this one has run
        batch = len(seqs)
        bucket = next(b for b in self.buckets if b >= batch)
        if continuing:
            self._advance(seqs)
        else:
            input_ids, positions, meta, _, _ = self.runner.step_inputs(scheduled, {})
            self._fill(batch, bucket, input_ids[0], positions[0], meta)
            self.fed_positions = [seq.num_computed_tokens for seq in seqs]
            self.row_blocks = [len(seq.block_table) for seq in seqs]
        self.refills[not continuing] += 1
        logits = self._replay(bucket) if self.capture is not None else self._forward(bucket)
        self.steps[bucket] += 1
        self.batch, self.carried = seqs, None
        # decode i is flat token i; the index copies the rows out of a graph's static output
        return logits[self.decode_index[:batch]].float(), [slice(i, i + 1) for i in range(batch)]

    def carry(self, ids: torch.Tensor) -> bool:
        """The last step's sampled ids [batch], on the device: the next step's input if it continues.
        False where the last step did not run on these buffers."""
        self.carried = ids if self.batch else None
        return self.carried is not None

    def forget(self) -> None:
        """Another path ran a step: the buffers no longer describe the running batch."""
        self.batch, self.carried = [], None

    def _continues(self, seqs, ahead: bool) -> bool:
        """The same sequences in the same order as the last step, each one position further, with
        that step's ids carried: then only what changed is written (a step ahead lags by one)."""
        if self.carried is None or len(seqs) != len(self.batch) or any(a is not b for a, b in zip(seqs, self.batch)):
            return False
        lag = 0 if ahead else 1
        return all(seq.num_computed_tokens == p + lag for seq, p in zip(seqs, self.fed_positions))

    def _advance(self, seqs) -> None:
        """Next position of every row, in place on the device: ids from the sampler, positions and
        context lengths + 1, block-table entries only for new blocks, slots gathered from the table."""
        batch, size = len(seqs), self.runner.block_size
        self.input_ids[0, :batch].copy_(self.carried)
        positions = self.positions[0, :batch]
        positions += 1
        self.context_lens[:batch] += 1
        self.fed_positions = [p + 1 for p in self.fed_positions]
        new = [(row, col, seq.block_table[col]) for row, (seq, known) in enumerate(zip(seqs, self.row_blocks))
               for col in range(known, len(seq.block_table))]
        if new:  # a sequence crossed into a block: one small copy for all such entries
            rows, cols, blocks = torch.tensor(new, dtype=torch.long).t().to(self.runner.device, non_blocking=True)
            self.block_tables.index_put_((rows, cols), blocks)
            self.row_blocks = [len(seq.block_table) for seq in seqs]
            self.block_writes += len(new)
        table_entry = self.block_tables[:batch].gather(1, (positions // size)[:, None])[:, 0]
        self.slot_mapping[:batch] = table_entry * size + positions % size

    def _fill(self, batch: int, bucket: int, input_ids, positions, meta: AttentionMetadata) -> None:
        width = meta.decode_block_tables.shape[1]
        for buffer, rows in ((self.input_ids[0], input_ids), (self.positions[0], positions),
                             (self.slot_mapping, meta.slot_mapping), (self.context_lens, meta.decode_context_lens)):
            buffer[:batch].copy_(rows, non_blocking=True)
        self.block_tables[:batch, :width].copy_(meta.decode_block_tables, non_blocking=True)
        self.block_tables[:batch, width:] = self.scratch_block
        self.input_ids[0, batch:bucket] = 0
        self.positions[0, batch:bucket] = 0
        self.slot_mapping[batch:bucket] = self.scratch_slot
        self.block_tables[batch:bucket] = self.scratch_block
        self.context_lens[batch:bucket] = 0

    def _forward(self, bucket: int) -> torch.Tensor:
        """All `bucket` rows through the model, reading only the static buffers: [bucket, vocab]."""
        meta = AttentionMetadata(self.slot_mapping[:bucket], [], self.decode_index[:bucket],
                                 self.block_tables[:bucket], self.context_lens[:bucket],
                                 workspace=self.runner.workspace)
        return self.runner.run_model(self.input_ids[:, :bucket], self.positions[:, :bucket], meta, 0)

    def _replay(self, bucket: int) -> torch.Tensor:
        if bucket not in self.graphs:  # captured on first use
            replay, output, self.pool = self.capture(lambda: self._forward(bucket), self.pool)
            self.graphs[bucket] = (replay, output)
        replay, logits = self.graphs[bucket]
        replay()
        return logits
