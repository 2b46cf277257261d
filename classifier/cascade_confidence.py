"""How sure the cheap tier is of its own answer, read from the logprobs of the tokens it chose.

A cascade keeps an answer whose confidence is at or above a calibrated threshold and re-asks one
tier up otherwise. Higher means more likely right. The statistic is the answer's narrowest margin:
over its tokens, the least gap in logprob between the chosen token and the best other one. It was
chosen on the training rows of the project's outcome set (benchmarks/cascade_outcomes.py,
docs/routing.md); callers depend only on this signature and on DEFAULT_THRESHOLD.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# the top_logprobs answer_confidence reads: the chosen token and its best rival
TOP_LOGPROBS = 2
# a token with no rival in sight is capped: confidences stay finite for thresholds, JSON and metrics
MAX_MARGIN = 20.0
# classifier/cascade_calibration.calibrate_threshold at the router's default quality target, on the
# outcome set's verdicts for the shipped cheap tier (docs/routing.md); keep an answer at or above it
DEFAULT_THRESHOLD = 0.0


def token_margin(chosen: float, top: Sequence[float] | None) -> float:
    """The chosen token's logprob minus the best other candidate's (negative when a sampler picked a
    token below the top one). Without the alternatives, the narrowest margin the chosen logprob
    allows: the rest of the probability mass in one rival."""
    rest = list(top or ())
    for i, value in enumerate(rest):  # the chosen token is among its own top list: drop it once
        if abs(value - chosen) <= 5e-4:
            del rest[i]
            break
    if rest:
        rival = max(rest)
    else:
        mass = 1.0 - float(np.exp(min(chosen, 0.0)))
        rival = float(np.log(mass)) if mass > 0 else -np.inf
    return float(min(chosen - rival, MAX_MARGIN))


def answer_confidence(logprobs: Sequence[float], top_logprobs: Sequence[Sequence[float]] | None = None) -> float:
    """A score for one generated answer; an empty answer has none to give and scores lowest."""
    if not logprobs:
        return float("-inf")
    tops = top_logprobs if top_logprobs is not None and len(top_logprobs) == len(logprobs) else [None] * len(logprobs)
    return min(token_margin(float(lp), top) for lp, top in zip(logprobs, tops))
