"""One request's state inside the engine."""
from __future__ import annotations

import enum
import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ..structured.output_shape import OutputShape


INTERACTIVE, BATCH = "interactive", "batch"
PRIORITIES = (INTERACTIVE, BATCH)  # batch: admitted with what interactive work leaves, preempted first


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
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: dict[int, float] = field(default_factory=dict)
    logprobs: int | None = None  # None: off; k: the chosen token's logprob plus the top k
    grammar: str | None = None  # llguidance grammar that constrains the output (engine/structured/grammar.py)
    shape: "OutputShape | None" = None  # the grammar's output shape: lets the engine finish it in time
    close_in_budget: bool = True  # force the shortest valid ending when max_tokens would cut it
    priority: str = INTERACTIVE  # one of PRIORITIES (engine/core/scheduler.py)
    cache_salt: str | None = None  # prefix-cache scope (block_manager.py): only requests with the same salt share blocks

    @property
    def has_penalties(self) -> bool:
        return bool(self.presence_penalty or self.frequency_penalty or self.repetition_penalty != 1.0)

    @property
    def is_plain(self) -> bool:
        """Nothing but temperature/top-k/top-p: the only sampling speculative decoding verifies."""
        return not (self.has_penalties or self.logit_bias or self.grammar is not None or self.logprobs is not None)


_ids = itertools.count()


class Sequence:
    def __init__(self, prompt_ids: list[int], params: SamplingParams, eos_token_ids: set[int] = frozenset(),
                 device: torch.device | str = "cpu"):
        """`device` is where a seeded request's generator lives: the engine's, so its draws stay there."""
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
        self.scheduled_time: float | None = None  # first admitted to run: its queue wait ends here
        self.stop_ids = set(params.stop_token_ids) | (set() if params.ignore_eos else set(eos_token_ids))
        self.generator = torch.Generator(device).manual_seed(params.seed) if params.seed is not None else None
        self.matcher = None  # llguidance matcher when params.grammar is set (attached by the engine)
        self.guard = None  # LengthGuard when the output's shape is known (engine/structured/length_guard.py)
        self.logprobs: list[tuple[int, float, list[tuple[int, float]]]] = []  # per output token, if asked

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
        if self.matcher is not None:
            self.matcher.consume_token(token)
        if self.guard is not None and self.guard.closed:
            self.mark_finished("length")  # the budget ran out: the ending was forced, the output still parses
        elif token in self.stop_ids:
            self.mark_finished("stop")
        elif self.matcher is not None and self.matcher.is_stopped():
            self.mark_finished("stop")  # the grammar is complete and allows nothing more
        elif self.num_output_tokens >= self.params.max_tokens:
            self.mark_finished("length")

    def mark_finished(self, reason: str) -> None:
        self.status = SequenceStatus.FINISHED
        self.finish_reason = reason

    def __repr__(self) -> str:
        return f"Sequence({self.seq_id}, {self.status.value}, tokens={self.num_tokens}, computed={self.num_computed_tokens})"
