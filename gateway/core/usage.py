"""A request's token usage as the relay learns it: what the worker reported, or who counted it
instead (worker_usage.py), and when the first token arrived. A value: each step that learns
more returns a new one."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reported: bool = False  # False: the answer carried none (e.g. a cut stream): worker_usage.py counts it
    first_token_at: float = 0.0
    source: str = "estimate"  # worker (the worker's own count), tokenizer (the tier's) or estimate

