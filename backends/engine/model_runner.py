"""Runs one flat batch through an unmodified transformers model on the paged KV cache.

Our attention function is registered with transformers' AttentionInterface under the
name "tiergate_paged"; the model is loaded with that implementation, so every decoder
that dispatches attention through the interface (Llama/SmolLM2, Gemma 3, Qwen, ...)
reads and writes our paged cache without model code of our own. The per-step metadata
(slots, block tables) reaches the attention function through `_current`, set around the
forward pass, as the model's forward has no slot for it.
"""
from __future__ import annotations

import torch
from transformers import AttentionInterface, AutoModelForCausalLM, PreTrainedModel
from transformers.masking_utils import AttentionMaskInterface

from kernels.paged_attention import AttentionMetadata, GatherWorkspace, PrefillChunk, paged_attention

from .config import EngineConfig
from .sequence import Sequence

ATTN_IMPLEMENTATION = "tiergate_paged"


class _StepContext:
    meta: AttentionMetadata | None = None
    kv_caches: list[tuple[torch.Tensor, torch.Tensor]] = []


_current = _StepContext()


def _attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
               sliding_window=None, softcap=None, **kwargs):
    """transformers calls this per layer with q [1, Hq, T, D] and k/v [1, Hkv, T, D]."""
    k_cache, v_cache = _current.kv_caches[module.layer_idx]
    out = paged_attention(query[0].transpose(0, 1), key[0].transpose(0, 1), value[0].transpose(0, 1),
                          k_cache, v_cache, _current.meta, scaling, sliding_window, softcap)
    return out[None], None


def _no_mask(*args, **kwargs):
    """Masking (causal, sliding window, sequence boundaries) happens inside the paged
    attention from the block tables, so transformers need not build a dense mask."""
    return None


AttentionInterface.register(ATTN_IMPLEMENTATION, _attention)
AttentionMaskInterface.register(ATTN_IMPLEMENTATION, _no_mask)


def load_model(path, dtype: torch.dtype = torch.float32) -> PreTrainedModel:
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=ATTN_IMPLEMENTATION)
    move_to_anonymous_memory(model)
    return model.eval()


def move_to_anonymous_memory(model: torch.nn.Module) -> None:
    """safetensors leaves weights memory-mapped from the file; matmuls on those pages run
    ~10x slower here (file-backed pages get reclaimed and faulted back in). Copy each
    distinct tensor once, keeping tied weights tied."""
    copies: dict[int, torch.Tensor] = {}
    for tensor in list(model.parameters()) + list(model.buffers()):
        key = tensor.data_ptr()
        if key not in copies:
            copies[key] = tensor.data.clone()
        tensor.data = copies[key]


class ModelRunner:
    def __init__(self, model: PreTrainedModel, config: EngineConfig):
        self.model = model
        self.config = config
        text_config = model.config.get_text_config()
        self.num_layers = text_config.num_hidden_layers
        self.kv_heads = text_config.num_key_value_heads
        self.head_dim = getattr(text_config, "head_dim", None) or text_config.hidden_size // text_config.num_attention_heads
        self.dtype = model.dtype
        self.block_size = config.block_size
        self.num_blocks = config.num_blocks or max(1, config.kv_cache_bytes // self.bytes_per_block())
        shape = (self.num_blocks, self.block_size, self.kv_heads, self.head_dim)
        self.kv_caches = [(torch.zeros(shape, dtype=self.dtype), torch.zeros(shape, dtype=self.dtype))
                          for _ in range(self.num_layers)]
        self.workspace = GatherWorkspace()

    def bytes_per_block(self) -> int:
        element = torch.finfo(self.model.dtype).bits // 8
        return 2 * self.num_layers * self.block_size * self.kv_heads * self.head_dim * element

    def _metadata(self, scheduled: list[tuple[Sequence, int]], drafts: dict[int, list[int]]):
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
    def forward(self, scheduled: list[tuple[Sequence, int]], drafts: dict[int, list[int]] | None = None):
        """One forward pass over the step. Returns (logits, rows): rows[i] is the slice of
        logits for scheduled[i] (its next-token position, then one per draft token), or
        None for a prompt chunk that does not reach the end of the prompt."""
        input_ids, positions, meta, logit_index, rows = self._metadata(scheduled, drafts or {})
        _current.meta, _current.kv_caches = meta, self.kv_caches
        try:
            logits = self.model(input_ids=input_ids, position_ids=positions, use_cache=False,
                                logits_to_keep=torch.tensor(logit_index, dtype=torch.long)).logits[0]
        finally:
            _current.meta = None
        return logits.float(), rows
