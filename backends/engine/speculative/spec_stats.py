"""Counters of speculative decoding: how much was drafted and how much the target kept."""
from __future__ import annotations


class SpecStats:
    def __init__(self, num_positions: int):
        self.steps = 0  # verifications (one per sequence per step with a draft)
        self.draft_tokens = 0
        self.accepted_tokens = 0
        self.accepted_at = [0] * num_positions  # accepted drafts by position in the draft
        self.drafted_at = [0] * num_positions

    def record(self, drafted: int, accepted: int) -> None:
        self.steps += 1
        self.draft_tokens += drafted
        self.accepted_tokens += accepted
        for i in range(drafted):
            self.drafted_at[i] += 1
            if i < accepted:
                self.accepted_at[i] += 1

    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else 0.0

    def mean_tokens_per_step(self) -> float:
        """Tokens a speculating sequence gains per step: accepted drafts plus the one the target adds."""
        return (self.accepted_tokens + self.steps) / self.steps if self.steps else 0.0
