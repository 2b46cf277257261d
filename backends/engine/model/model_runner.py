"""Runs one flat batch through an unmodified transformers model on the paged KV cache.

Our attention function is registered with transformers' AttentionInterface under the
name "tiergate_paged"; the model is loaded with that implementation, so every decoder
that dispatches attention through the interface (Llama/SmolLM2, Gemma 3, Qwen, ...)
reads and writes our paged cache without model code of our own. The per-step metadata
(slots, block tables) reaches the attention function through `_current`, set around the
forward pass, as the model's forward has no slot for it.

What differs by device is the runner's ExecutionPlan (engine/model/plans.py), chosen once: the
attention kernels (Triton on CUDA), whether each step's metadata is copied over, how the pool
is sized (a profiling forward against the GPU's memory), and the path of pure decode steps
(captured CUDA graphs, the same static buffers run eagerly, or a compiled graph on CPU).
"""
from __future__ import annotations

from functools import partial

import torch
from transformers import AttentionInterface, AutoModelForCausalLM, PreTrainedModel
from transformers.masking_utils import AttentionMaskInterface

from kernels.paged_attention import (AttentionMetadata, GatherWorkspace, PrefillChunk, paged_attention,
                                     static_decode_attention)

from .compiled_decode import CompiledDecode
from .decode_packages import PackageShelf
from .models import cache_root
from ..config import EngineConfig
from ..device_defaults import defaults_for
from .cuda_graphs import DecodeGraphRunner
from .device import resolve_kv_dtype, zeroed_on_touch
from ..quant.int4_checkpoints import folder_format, load_int4_checkpoint
from .plans import Decode, ExecutionPlan, choose_plan
from ..core.sequence import SamplingParams, Sequence

ATTN_IMPLEMENTATION = "tiergate_paged"


class _StepContext:
    meta: AttentionMetadata | None = None
    attend = staticmethod(paged_attention)


_current = _StepContext()


def _attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
               sliding_window=None, softcap=None, paged_decode=None, **kwargs):
    """transformers calls this per layer with q [1, Hq, T, D] and k/v [1, Hkv, T, D].
    `paged_decode` (slots, block tables, context lengths) marks a compiled decode step."""
    q, k, v = query[0].transpose(0, 1), key[0].transpose(0, 1), value[0].transpose(0, 1)
    if paged_decode is not None:
        out = static_decode_attention(q, k, v, module.paged_k_cache, module.paged_v_cache, *paged_decode,
                                      scaling, sliding_window, softcap)
    else:
        out = _current.attend(q, k, v, module.paged_k_cache, module.paged_v_cache, _current.meta, scaling,
                              sliding_window, softcap)
    return out[None], None


def _no_mask(*args, **kwargs):
    """Masking (causal, sliding window, sequence boundaries) happens inside the paged
    attention from the block tables, so transformers need not build a dense mask."""
    return None


AttentionInterface.register(ATTN_IMPLEMENTATION, _attention)
AttentionMaskInterface.register(ATTN_IMPLEMENTATION, _no_mask)


def load_model(path, dtype: torch.dtype = torch.float32, device: torch.device = torch.device("cpu")) -> PreTrainedModel:
    """An AWQ / GPTQ int4 folder comes back with its linears already Int4Linear (int4_checkpoints.py)."""
    checkpoint = folder_format(path)  # ValueError for quantized formats we cannot serve
    if checkpoint is not None:
        model = load_int4_checkpoint(path, checkpoint, dtype, device, ATTN_IMPLEMENTATION)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=ATTN_IMPLEMENTATION)
    if defaults_for(device.type).weights_out_of_map:
        move_to_anonymous_memory(model)
    else:
        model.to(device)
    return model.eval()


def move_to_anonymous_memory(model: torch.nn.Module) -> None:
    """safetensors leaves weights memory-mapped from the file, and matmuls on those pages run
    far slower (file-backed pages get reclaimed and faulted back in: docs/engine-cpu.md). Copy
    each distinct tensor once, keeping tied weights tied."""
    copies: dict[int, torch.Tensor] = {}
    for tensor in list(model.parameters()) + list(model.buffers()):
        key = tensor.data_ptr()
        if key not in copies:
            copies[key] = tensor.data.clone()
        tensor.data = copies[key]


def attention_modules(model: PreTrainedModel, num_layers: int) -> list[torch.nn.Module]:
    """The module of each layer that calls the attention interface (it has transformers'
    `layer_idx` and `scaling`), in layer order."""
    found = {m.layer_idx: m for m in model.modules()
             if isinstance(getattr(m, "layer_idx", None), int) and hasattr(m, "scaling")}
    if sorted(found) != list(range(num_layers)):
        raise ValueError(f"expected attention modules for layers 0..{num_layers - 1}, found {sorted(found)}")
    return [found[i] for i in range(num_layers)]


class ModelRunner:
    def __init__(self, model: PreTrainedModel, config: EngineConfig, max_model_len: int | None = None,
                 plan: ExecutionPlan | None = None):
        """max_model_len sizes the decode graphs' block tables (graphs need it; None: no graphs).
        `plan` says how to run on the model's device (default: choose_plan for it)."""
        self.model = model
        self.config = config
        text_config = model.config.get_text_config()
        self.num_layers = text_config.num_hidden_layers
        self.kv_heads = text_config.num_key_value_heads
        self.head_dim = getattr(text_config, "head_dim", None) or text_config.hidden_size // text_config.num_attention_heads
        self.dtype = model.dtype
        self.block_size = config.block_size
        self.device = model.device
        self.plan = plan or choose_plan(config, self.device)
        self.kv_dtype = resolve_kv_dtype(config.kv_cache_dtype, model.dtype, self.plan.defaults.narrow_kv_pool)
        # kernels loaded, fused kernels swapped in (engine/model/fusion.py) before the pool is sized and graphs captured
        self.plan.prepare(model)
        self.workspace = GatherWorkspace()
        self.attention_modules = attention_modules(model, self.num_layers)
        self.decode_graphs = self.compiled = None  # set below; the profiling forward runs eagerly
        self.num_blocks = config.num_blocks or self._pool_blocks()
        graphs = max_model_len is not None and self.plan.decode in (Decode.GRAPHS, Decode.PADDED)
        # with graphs, one block past the block manager's num_blocks takes padded tokens' K/V
        self.kv_caches = self._allocate_pool(self.num_blocks + (1 if graphs else 0))
        if graphs:
            self.decode_graphs = DecodeGraphRunner(
                self, config.max_num_seqs, -(-max_model_len // self.block_size), scratch_block=self.num_blocks,
                capture=self.plan.capture if self.plan.decode == Decode.GRAPHS else None)
        if self.plan.decode == Decode.COMPILED:
            # a table is never wider than the pool has blocks
            self.compiled = CompiledDecode(model, self.attention_modules, self.kv_caches, pad_block=0,
                                           max_batch=config.max_num_seqs, max_blocks=self.num_blocks,
                                           shelf=PackageShelf(cache_root() / "decode-packages"))
            self.compiled.warm_up(self.dummy_decode)

    def dummy_decode(self, batch: int, blocks: int) -> None:
        """A decode step of `batch` one-token sequences with `blocks` blocks each, all block 0
        (a free block's content is never read before a real token overwrites it)."""
        seqs = [Sequence([0, 0], SamplingParams()) for _ in range(batch)]
        for seq in seqs:
            seq.block_table, seq.num_computed_tokens = [0] * blocks, 1
        self.forward([(seq, 1) for seq in seqs])

    def _allocate_pool(self, num_blocks: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        shape = (num_blocks, self.block_size, self.kv_heads, self.head_dim)
        zeros = zeroed_on_touch if self.plan.defaults.pool_zeroed_on_touch else partial(torch.zeros, device=self.device)
        pool = [(zeros(shape, dtype=self.kv_dtype), zeros(shape, dtype=self.kv_dtype)) for _ in range(self.num_layers)]
        self._bind(pool)
        return pool

    def _bind(self, pool: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Each attention module holds its layer's pool tensors, so the attention reads them from
        the module (one compiled graph serves every layer; an index by layer would not)."""
        for module, (k_cache, v_cache) in zip(self.attention_modules, pool):
            module.paged_k_cache, module.paged_v_cache = k_cache, v_cache

    def _pool_blocks(self) -> int:
        if self.plan.kv_budget is None:
            return max(1, self.config.kv_cache_bytes // self.bytes_per_block())
        return max(1, self.plan.kv_budget(self._profile_forward) // self.bytes_per_block())

    def _profile_forward(self) -> None:
        """One prompt chunk at the full token budget on a throwaway pool: the activation peak."""
        tokens = self.config.max_num_batched_tokens
        blocks = -(-tokens // self.block_size)
        self.kv_caches = self._allocate_pool(blocks)
        seq = Sequence([0] * tokens, SamplingParams())
        seq.block_table = list(range(blocks))
        self.forward([(seq, tokens)])
        del self.kv_caches

    def bytes_per_block(self) -> int:
        element = torch.finfo(self.kv_dtype).bits // 8
        return 2 * self.num_layers * self.block_size * self.kv_heads * self.head_dim * element

    def step_inputs(self, scheduled: list[tuple[Sequence, int]], drafts: dict[int, list[int]]):
        """Flatten the step into one batch. A sequence with draft tokens feeds its next token
        plus the drafts, and gets logits at every one of those positions (to verify them)."""
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        prefills: list[PrefillChunk] = []
        decode_index: list[int] = []
        decode_tables: list[list[int]] = []
        decode_lens: list[int] = []
        logit_index: list[int] = []
        rows: list[slice | None] = []
        bs = self.block_size
        for seq, n in scheduled:
            start = seq.num_computed_tokens
            draft = drafts.get(seq.seq_id, [])
            tokens = seq.token_ids[start:start + n] + draft
            n = len(tokens)
            offset = len(input_ids)
            input_ids.extend(tokens)
            positions.extend(range(start, start + n))
            table = seq.block_table
            slots.extend(table[p // bs] * bs + p % bs for p in range(start, start + n))
            if n == 1:
                decode_index.append(offset)
                decode_tables.append(table)
                decode_lens.append(start + 1)
            else:
                prefills.append(PrefillChunk(offset, offset + n, start + n, torch.tensor(table, dtype=torch.long)))
            if start + n - len(draft) == seq.num_tokens:  # the prompt is complete: logits are needed
                first = offset + n - 1 - len(draft)
                rows.append(slice(len(logit_index), len(logit_index) + 1 + len(draft)))
                logit_index.extend(range(first, offset + n))
            else:
                rows.append(None)
        width = max((len(t) for t in decode_tables), default=0)
        meta = AttentionMetadata(
            slot_mapping=torch.tensor(slots, dtype=torch.long),
            prefills=prefills,
            decode_index=torch.tensor(decode_index, dtype=torch.long),
            decode_block_tables=torch.tensor([t + [0] * (width - len(t)) for t in decode_tables], dtype=torch.long),
            decode_context_lens=torch.tensor(decode_lens, dtype=torch.long),
            workspace=self.workspace,
        )
        return torch.tensor(input_ids)[None], torch.tensor(positions)[None], meta, logit_index, rows

    @torch.inference_mode()
    def forward(self, scheduled: list[tuple[Sequence, int]], drafts: dict[int, list[int]] | None = None,
                ahead: bool = False):
        """One forward pass over the step. Returns (logits, rows): rows[i] is the slice of
        logits for scheduled[i] (its next-token position, then one per draft token), or
        None for a prompt chunk that does not reach the end of the prompt. `ahead`: the
        previous decode batch continues before the host has its tokens (engine/model/cuda_graphs.py)."""
        if self.decode_graphs is not None:
            if ahead or self.decode_graphs.accepts(scheduled, drafts):
                return self.decode_graphs.run(scheduled, ahead)
            self.decode_graphs.forget()
        elif ahead:
            raise RuntimeError("a step can run ahead only on the decode graphs' persistent batch")
        if self.compiled is not None and not drafts:
            # a decode feeds a sequence's last token: one token, and its logits are needed
            decodes = [i for i, (seq, n) in enumerate(scheduled) if n == 1 and seq.num_computed_tokens + 1 == seq.num_tokens]
            if len(decodes) == len(scheduled):
                input_ids, positions, meta, _, rows = self.step_inputs(scheduled, {})
                self._bind_pool()
                return self.compiled(input_ids, positions, meta).float(), rows
            if decodes:
                return self._split_step(scheduled, decodes)
        input_ids, positions, meta, logit_index, rows = self.step_inputs(scheduled, drafts or {})
        keep = torch.tensor(logit_index, dtype=torch.long)
        if self.plan.moves_inputs:
            input_ids, positions, keep, meta = (input_ids.to(self.device), positions.to(self.device),
                                                keep.to(self.device), meta.to(self.device))
        # logits stay on the device: the sampler runs there, and only token ids come back
        return self.run_model(input_ids, positions, meta, keep).float(), rows

    def carry(self, ids: torch.Tensor) -> bool:
        """The sampled ids of the step just run (all its sequences, in order), left on the device
        for the next step; True where that step ran on the decode graphs' persistent batch."""
        return self.decode_graphs is not None and self.decode_graphs.carry(ids)

    def _split_step(self, scheduled: list[tuple[Sequence, int]], decodes: list[int]):
        """A step that mixes prompt chunks with decodes (under steady load, most steps): the
        decodes run through the compiled graph, the chunks eagerly. Two forwards over
        different sequences' blocks; logits are concatenated, chunks' rows first."""
        chosen = set(decodes)
        chunk_logits, chunk_rows = self.forward([item for i, item in enumerate(scheduled) if i not in chosen])
        decode_logits, decode_rows = self.forward([scheduled[i] for i in decodes])
        offset = len(chunk_logits)
        moved = iter(slice(r.start + offset, r.stop + offset) for r in decode_rows)
        kept = iter(chunk_rows)
        rows = [next(moved) if i in chosen else next(kept) for i in range(len(scheduled))]
        return torch.cat([chunk_logits, decode_logits]), rows

    def _bind_pool(self) -> None:
        if self.attention_modules[0].paged_k_cache is not self.kv_caches[0][0]:
            self._bind(self.kv_caches)  # another runner of the same model ran last

    def run_model(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata,
                  keep: torch.Tensor | int) -> torch.Tensor:
        """The model on one flat batch already on the device: logits [len(keep) or all, vocab]."""
        self._bind_pool()
        _current.meta, _current.attend = meta, self.plan.attend
        try:
            return self.model(input_ids=input_ids, position_ids=positions, use_cache=False,
                              logits_to_keep=keep).logits[0]
        finally:
            _current.meta = None
