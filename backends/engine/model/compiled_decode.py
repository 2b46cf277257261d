"""Compiled decode steps on CPU: the whole model's decode forward as one torch.compile graph,
the CPU analogue of CUDA graphs.

At batch 1 a SmolLM2 decode step spent two thirds of its time outside the matmuls: ~60 small
aten ops per layer (norms, rotary, residuals, dtype casts around the int4 kernel) and the
paged attention's Python, each with its own dispatch cost. Inductor turns the step into C++
kernels around the matmul calls, with the attention traced too
(kernels.paged_attention.static_decode_attention: no data-dependent shape, so it compiles).

- One graph for the whole model, not one per layer: a graph call pays dynamo's guard check and
  its Python wrapper once per step instead of once per layer.
- Freezing: the weights become constants of the graph, so nothing checks them per call.
- A C++ wrapper calls the kernels, so a step runs no Python between them.
- Shapes: the batch and the block-table width are dynamic, so a graph serves every decode
  step; batch 1 gets its own specialised graph (torch specialises size-1 dimensions), and
  the table is padded to at least 2 blocks so width 1 needs none. Both graphs are built by
  `warm_up` before the worker serves.
- The metadata reaches the attention as a keyword argument of the model call (transformers
  passes unknown keyword arguments down to the attention function), never through globals.

Only pure decode steps run compiled: prefill chunks and speculative verification have
per-sequence shapes and run the eager model.
"""
from __future__ import annotations

import functools
import logging
import time

import torch
from torch import nn

from kernels.paged_attention import AttentionMetadata

log = logging.getLogger("tiergate.engine")
MIN_BLOCKS = 2  # tables narrower than this are padded: width 1 would be one more specialised graph


class CompiledDecode:
    def __init__(self, model: nn.Module, pad_block: int):
        """`pad_block`: the block id that pads block tables (masked out by context length)."""
        self.model = model
        self.pad_block = pad_block
        self.steps = 0  # decode steps run through the compiled graph (logs and tests)
        self.warmed_up = False
        # Dynamo reads freezing from the global config when it traces (frozen weights need no
        # guards); this process compiles nothing else, so it is set for the process.
        torch._inductor.config.freezing = True
        # cpp_wrapper: the graph calls its kernels from generated C++: a Python wrapper between
        # them was a large share of a batch-1 step (docs/engine-cpu.md)
        compile = functools.partial(torch.compile, fullgraph=True, dynamic=False, options={"cpp_wrapper": True})
        # two functions, so each keeps one graph: dynamo then checks no guard to pick it
        self._single, self._batched = compile(self._forward_single), compile(self._forward_batched)

    def _forward(self, batched: bool, input_ids, positions, slot_mapping, block_tables, context_lens) -> torch.Tensor:
        inputs = dict(input_ids=input_ids, position_ids=positions, use_cache=False,
                      paged_decode=(slot_mapping, block_tables, context_lens))
        head = self.model.get_output_embeddings()
        if not (batched and getattr(head, "dense_codes", None) is not None):
            return self.model(**inputs).logits[0]
        # batched steps take the int8 head's dense copy, so the head is applied here: the causal
        # LMs that attach_dense_head admits do nothing else to their hidden states
        return head.dense_forward(self.model.model(**inputs).last_hidden_state[0])

    def _forward_single(self, *inputs) -> torch.Tensor:
        return self._forward(False, *inputs)

    def _forward_batched(self, *inputs) -> torch.Tensor:
        return self._forward(True, *inputs)

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        """Logits [batch, vocab] of a pure decode step (flat token i is sequence i)."""
        tables = meta.decode_block_tables
        if tables.shape[1] < MIN_BLOCKS:
            pad = torch.full((tables.shape[0], MIN_BLOCKS - tables.shape[1]), self.pad_block, dtype=tables.dtype)
            tables = torch.cat([tables, pad], dim=1)
        inputs = (input_ids, positions, meta.slot_mapping, tables, meta.decode_context_lens)
        for tensor, dim in zip(inputs + (tables,), (1, 1, 0, 0, 0, 1)):  # the batch, and the table's width
            torch._dynamo.maybe_mark_dynamic(tensor, dim)
        self.steps += 1
        # once warm, check only the guards that pick between the graphs (the batch size);
        # a full guard check per call costs more than the fused kernels of a small model
        with torch.compiler.set_stance("default", skip_guard_eval_unsafe=self.warmed_up):
            return (self._single if len(tables) == 1 else self._batched)(*inputs)

    def warm_up(self, run_decode) -> None:
        """Build both graphs before serving: `run_decode(batch, blocks)` runs one decode step."""
        began = time.perf_counter()
        for batch in (1, 2):
            log.info("compiling decode steps for batch %s ...", "1" if batch == 1 else ">= 2")
            run_decode(batch, MIN_BLOCKS + 1)
        self.warmed_up = True
        log.info("decode steps compiled in %.1f s", time.perf_counter() - began)
