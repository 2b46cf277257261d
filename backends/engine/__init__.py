"""Continuous-batching engine: paged KV cache, prefix caching, chunked prefill, preemption."""
from .config import EngineConfig
from .core.sequence import SamplingParams, Sequence, SequenceStatus

__all__ = ["EngineConfig", "SamplingParams", "Sequence", "SequenceStatus"]
