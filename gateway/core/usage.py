"""A request's token usage as the relay learns it: what the worker reported, or who counted it
instead (worker_usage.py), and when the first token arrived. A value: each step that learns
more returns a new one."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Tier


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reported: bool = False  # False: the answer carried none (e.g. a cut stream): worker_usage.py counts it
    first_token_at: float = 0.0
    source: str = "estimate"  # worker (the worker's own count), tokenizer (the tier's) or estimate



@dataclass(frozen=True, slots=True)
class AttemptBill:
    """One attempt billed apart from the answer the client got: an answer a shape re-ask replaced,
    or an attempt the gateway gave up on (a timeout, a worker error after it began). Settled under
    its own attempt id (upstream.attempt_id), so a request's bill is the sum of its attempts."""
    attempt_id: str
    tier: Tier
    usage: Usage


MAX_REPORTED_TOKENS = 2**31 - 1  # above any context; a count past it is not believed


def reported_in(obj: dict, first_token_at: float = 0.0) -> Usage | None:
    """The usage an answer or a stream chunk reports, if it carries one whose counts are whole
    numbers from 0 to MAX_REPORTED_TOKENS (absent counts as 0); any other is not believed, and the
    answer is counted as one that reported none (a negative count would pay the tenant)."""
    reported = obj.get("usage")
    if not isinstance(reported, dict):
        return None
    counts = [reported.get("prompt_tokens") or 0, reported.get("completion_tokens") or 0]
    if not all(type(count) in (int, float) and 0 <= count <= MAX_REPORTED_TOKENS and count == int(count)
               for count in counts):
        return None
    return Usage(int(counts[0]), int(counts[1]), reported=True, first_token_at=first_token_at, source="worker")
