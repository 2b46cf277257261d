"""Compiled decode steps on CPU: the whole model's decode forward compiled ahead of time into one
shared library (AOTInductor), the CPU analogue of CUDA graphs.

A decode step of a small model spends most of its time outside the matmuls, in small aten ops
(norms, rotary, residuals, dtype casts around the int4 kernel) and the paged attention's Python,
each with its own dispatch cost. Inductor turns the step into C++ kernels around the matmul calls,
with the attention traced too (kernels.paged_attention.static_decode_attention: no data-dependent
shape, so it compiles).

- One graph for the whole model, not one per layer, called from C++: a step runs no Python
  between its kernels.
- Freezing: the weights become constants of the graph, so sibling int4 projections merge into one
  kernel call and nothing checks the weights per call.
- Shapes: the batch and the block-table width are dynamic within the engine's bounds, so one
  package serves every batched decode step; a batch of 1 has its own (a size-1 dimension is a
  constant to the compiler), and tables are padded to at least 2 blocks so width 1 needs none.
- The KV pool is an input of the step, written in place; the metadata reaches the attention as a
  keyword argument of the model call (transformers passes unknown keyword arguments down to the
  attention function), never through globals.
- Packages are built once per model, code and machine and loaded on every later start
  (model/decode_packages.py); `warm_up` gets both before the worker serves.

Only pure decode steps run compiled: prefill chunks and speculative verification have
per-sequence shapes and run the eager model.
"""
from __future__ import annotations

import hashlib
import logging
import time

import torch
from torch import nn

from kernels.paged_attention import AttentionMetadata

from .decode_packages import (LoadedStep, PackageShelf, StepShape, compile_package, environment, export_step,
                              source_digest, tensors_digest)

log = logging.getLogger("tiergate.engine")
MIN_BLOCKS = 2  # tables narrower than this are padded: width 1 would be one more specialised package


class DecodeStep(nn.Module):
    """The step a package holds: the model's decode forward over the pool given as an input."""

    def __init__(self, model: nn.Module, attention: list[nn.Module], batched: bool):
        super().__init__()
        self.model = model
        self.attention = tuple(attention)  # a tuple: the modules are the model's, not registered twice
        self.batched = batched

    def forward(self, input_ids, positions, slot_mapping, block_tables, context_lens, pool) -> torch.Tensor:
        for module, (k_cache, v_cache) in zip(self.attention, pool):
            module.paged_k_cache, module.paged_v_cache = k_cache, v_cache
        inputs = dict(input_ids=input_ids, position_ids=positions, use_cache=False,
                      paged_decode=(slot_mapping, block_tables, context_lens))
        head = self.model.get_output_embeddings()
        if not (self.batched and getattr(head, "dense_codes", None) is not None):
            return self.model(**inputs).logits[0]
        # batched steps take the int8 head's dense copy, so the head is applied here: the causal
        # LMs that attach_dense_head admits do nothing else to their hidden states
        return head.dense_forward(self.model.model(**inputs).last_hidden_state[0])


class CompiledDecode:
    def __init__(self, model: nn.Module, attention: list[nn.Module], pool: list[tuple[torch.Tensor, torch.Tensor]],
                 pad_block: int, max_batch: int, max_blocks: int, shelf: PackageShelf):
        """`pad_block`: the block id that pads block tables (masked out by context length);
        `max_batch`, `max_blocks`: the largest decode batch and block table the packages serve."""
        self.model, self.attention, self.pool = model, attention, pool
        self.pad_block = pad_block
        self.max_batch, self.max_blocks = max(max_batch, 2), max(max_blocks, MIN_BLOCKS + 1)
        self.shelf = shelf
        self.steps = 0  # decode steps run through the compiled packages (logs and tests)
        self.built = 0  # packages this process compiled (the others were loaded)
        self.warmed_up = False
        self._single = self._batched = None

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        """Logits [batch, vocab] of a pure decode step (flat token i is sequence i)."""
        tables = meta.decode_block_tables
        if tables.shape[1] < MIN_BLOCKS:
            pad = torch.full((tables.shape[0], MIN_BLOCKS - tables.shape[1]), self.pad_block, dtype=tables.dtype)
            tables = torch.cat([tables, pad], dim=1)
        self.steps += 1
        step = self._single if len(tables) == 1 else self._batched
        return step(input_ids, positions, meta.slot_mapping, tables, meta.decode_context_lens)

    def warm_up(self, run_decode) -> None:
        """Load both packages (building what the shelf lacks), then run a decode step through each
        before serving: `run_decode(batch, blocks)` runs one decode step."""
        began = time.perf_counter()
        tensors = tensors_digest(self.model)
        digest = hashlib.sha256(f"{source_digest()}|{tensors}|{environment()}".encode())
        pool = tuple((tuple(k.shape), str(k.dtype)) for k, _ in self.pool)
        for batched in (False, True):
            shape = StepShape((2, self.max_batch) if batched else (1, 1), (MIN_BLOCKS, self.max_blocks), pool)
            key = digest.copy()
            key.update(repr((batched, shape)).encode())
            path, built = self.shelf.get(key.hexdigest(), tensors,
                                         lambda out, b=batched, s=shape: self._build(b, s, out))
            self.built += built
            loaded = LoadedStep(self.shelf.library(path), self.pool)
            self._single, self._batched = (self._single, loaded) if batched else (loaded, self._batched)
        for batch in (1, 2):
            run_decode(batch, MIN_BLOCKS + 1)
        self.warmed_up = True
        log.info("decode steps ready in %.1f s (%d of 2 packages compiled, the others loaded)",
                 time.perf_counter() - began, self.built)

    def _build(self, batched: bool, shape: StepShape, out) -> None:
        log.info("compiling the decode step for batch %s (once per model, code and machine) ...",
                 ">= 2" if batched else "1")
        batch = shape.batch[0]
        example = (torch.zeros(1, batch, dtype=torch.long), torch.ones(1, batch, dtype=torch.long),
                   torch.ones(batch, dtype=torch.long), torch.zeros(batch, MIN_BLOCKS + 1, dtype=torch.long),
                   torch.full((batch,), 2, dtype=torch.long), self.pool)
        try:
            with torch.no_grad():
                program = export_step(DecodeStep(self.model, self.attention, batched), example, shape)
        finally:  # the trace left its stand-in tensors on the modules
            for module, (k_cache, v_cache) in zip(self.attention, self.pool):
                module.paged_k_cache, module.paged_v_cache = k_cache, v_cache
        compile_package(program, out)
