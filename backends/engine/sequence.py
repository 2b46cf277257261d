"""One request's state inside the engine."""
from __future__ import annotations

import enum
import itertools
import time
from dataclasses import dataclass, field

import torch


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass
class SamplingParams:
    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False


_ids = itertools.count()


class Sequence:
    def __init__(self, prompt_ids: list[int], params: SamplingParams, eos_token_ids: set[int] = frozenset()):
        if not prompt_ids:
            raise ValueError("a sequence needs at least one prompt token")
        self.seq_id = next(_ids)
        self.token_ids: list[int] = list(prompt_ids)
        self.num_prompt_tokens = len(prompt_ids)
        self.num_computed_tokens = 0  # tokens whose K/V are in the cache
        self.num_cached_tokens = 0  # of those, how many came from the prefix cache at admission
        self.block_table: list[int] = []
        self.status = SequenceStatus.WAITING
        self.params = params
        self.finish_reason: str | None = None
        self.arrival_time = time.monotonic()
        self.stop_ids = set(params.stop_token_ids) | (set() if params.ignore_eos else set(eos_token_ids))
        self.generator = torch.Generator().manual_seed(params.seed) if params.seed is not None else None

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def append_token(self, token: int) -> None:
        self.token_ids.append(token)
        if token in self.stop_ids:
            self.finish("stop")
        elif self.num_output_tokens >= self.params.max_tokens:
            self.finish("length")

    def finish(self, reason: str) -> None:
        self.status = SequenceStatus.FINISHED
        self.finish_reason = reason

    def __repr__(self) -> str:
        return f"Sequence({self.seq_id}, {self.status.value}, tokens={self.num_tokens}, computed={self.num_computed_tokens})"
