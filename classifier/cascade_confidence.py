"""How sure the cheap tier is of its own answer, read from the logprobs of the tokens it chose.

A cascade keeps an answer whose confidence is at or above a calibrated threshold and re-asks one
tier up otherwise. Higher means more likely right. The statistic is chosen on the project's own
outcome sets (benchmarks/cascade_outcomes.py, docs/routing.md); callers depend only on this signature.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

QUANTILE = 0.1  # a low quantile: one unsure token in a short answer is what a wrong answer looks like


def answer_confidence(logprobs: Sequence[float], top_logprobs: Sequence[Sequence[float]] | None = None) -> float:
    """A score for one generated answer; an empty answer has none to give and scores lowest."""
    if not logprobs:
        return float("-inf")
    return float(np.quantile(np.asarray(logprobs, dtype=np.float64), QUANTILE))
