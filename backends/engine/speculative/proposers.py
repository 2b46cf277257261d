"""Speculative-decoding proposers: they guess the next few tokens of running sequences.

Both return, per sequence id, the draft tokens and (for a model) the draft distribution
each was drawn from, which exact verification needs; n-gram lookup is a point mass.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.sampling import draw

from ..core.block_manager import BlockManager
from ..config import EngineConfig
from ..core.sampler import request_probabilities
from ..core.sequence import Sequence


@dataclass
class Draft:
    tokens: list[int]
    probs: torch.Tensor | None  # [len(tokens), V], None for a point-mass proposer


class NgramProposer:
    """Prompt lookup: find the latest earlier occurrence of the sequence's last n tokens
    (longest n first) and propose what followed it. Pays off on input-grounded requests
    (summarise, extract, edit), where the answer copies spans of the prompt."""

    def __init__(self, num_tokens: int, max_n: int = 4, min_n: int = 2):
        self.num_tokens, self.max_n, self.min_n = num_tokens, max_n, min_n

    def propose(self, seqs: list[Sequence], limits: dict[int, int]) -> dict[int, Draft]:
        drafts = {}
        for seq in seqs:
            tokens = self._lookup(seq.token_ids, min(self.num_tokens, limits[seq.seq_id]))
            if tokens:
                drafts[seq.seq_id] = Draft(tokens, None)
        return drafts

    def _lookup(self, ids: list[int], k: int) -> list[int]:
        if k <= 0:
            return []
        for n in range(min(self.max_n, len(ids) - 1), self.min_n - 1, -1):
            pattern = ids[-n:]
            first = pattern[0]
            for start in range(len(ids) - n - 1, -1, -1):  # latest occurrence first, never the suffix itself
                if ids[start] == first and ids[start:start + n] == pattern:
                    return ids[start + n:start + n + k]
        return []

    def release(self, seq: Sequence) -> None:
        pass


class DraftModelProposer:
    """A smaller model with the same tokenizer runs k cheap steps ahead. It keeps a shadow
    of each sequence with its own paged KV cache; before each proposal the shadow is cut
    back to what the target accepted, so rejected drafts' K/V are simply overwritten.
    The shadow pool has no prefix cache: its blocks hold unverified tokens."""

    def __init__(self, model, num_tokens: int, config: EngineConfig):
        from ..model.model_runner import ModelRunner  # local: model_runner imports transformers

        self.num_tokens = num_tokens
        # The target's pool already took the GPU's share: the shadow pool is sized in bytes, never profiled.
        runner_config = EngineConfig(model="draft", block_size=config.block_size, kv_cache_bytes=config.kv_cache_bytes // 4,
                                     gpu_memory_utilization=None)
        self.runner = ModelRunner(model, runner_config)
        self.blocks = BlockManager(self.runner.num_blocks, config.block_size, enable_prefix_caching=False)
        self.shadows: dict[int, Sequence] = {}

    def _sync(self, seq: Sequence) -> Sequence:
        shadow = self.shadows.get(seq.seq_id)
        if shadow is None:
            shadow = self.shadows[seq.seq_id] = Sequence(seq.token_ids, seq.params, device=self.runner.device)
        common = 0
        for mine, theirs in zip(shadow.token_ids, seq.token_ids):
            if mine != theirs:
                break
            common += 1
        shadow.token_ids = list(seq.token_ids)
        shadow.num_computed_tokens = min(shadow.num_computed_tokens, common)
        return shadow

    def propose(self, seqs: list[Sequence], limits: dict[int, int]) -> dict[int, Draft]:
        shadows = {seq.seq_id: self._sync(seq) for seq in seqs}
        tokens = {sid: [] for sid in shadows}
        probs = {sid: [] for sid in shadows}
        for _ in range(self.num_tokens):
            active = [sid for sid, sh in shadows.items() if len(tokens[sid]) < limits[sid]
                      and self.blocks.allocate(sh, sh.num_tokens - sh.num_computed_tokens)]
            if not active:
                break
            batch = [(shadows[sid], shadows[sid].num_tokens - shadows[sid].num_computed_tokens) for sid in active]
            logits, rows = self.runner.forward(batch)
            for sid, (sh, n), row in zip(active, batch, rows):
                sh.num_computed_tokens += n
                token, p = self._draw(sh, logits[row])
                sh.token_ids.append(token)
                tokens[sid].append(token)
                probs[sid].append(p)
        return {sid: Draft(t, torch.stack(probs[sid]) if probs[sid][0] is not None else None)
                for sid, t in tokens.items() if t}

    @staticmethod
    def _draw(shadow: Sequence, logits: torch.Tensor) -> tuple[int, torch.Tensor | None]:
        if shadow.params.temperature == 0:
            return int(logits[-1].argmax()), None
        p = request_probabilities(shadow, logits[-1:])
        return int(draw(p, [shadow.generator])[0]), p[0]

    def release(self, seq: Sequence) -> None:
        shadow = self.shadows.pop(seq.seq_id, None)
        if shadow is not None:
            self.blocks.free(shadow)
