"""The cascade's threshold from verdicts, calibrated as the router's quality target is, with its guard.

A verdict is an answer's confidence (classifier/cascade_confidence.py), whether the cheap answer
was good and, where it was asked, whether the next tier's was. The threshold for a quality target
is the router's rule (classifier/outcome_target.py), run on the same code: the lowest confidence
to keep at which the quality lost against always escalating, plus Z standard errors, stays within
(1 - target) x the escalated answers' quality, tried from the strictest and stopped at the first
unsafe one. A next-tier verdict nobody asked for counts as right: the worst case for a kept answer.

A new threshold replaces the serving one only if, replayed on held-out verdicts, it meets the
target (classifier/replay.meets_target) and escalates no more than the serving one, unless the
serving one misses the target there: the guard the router's learner applies to its candidates.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .outcome_model import FAIL, PASS
from .outcome_target import DEFAULT_TARGET, TARGETS, calibrate, threshold_for
from .replay import Outcomes, meets_target

IN_PLAY = np.array([1, 2])  # the cheap tier and the one a cascade escalates to, as two levels


def _as_need(confidence: np.ndarray) -> tuple[np.ndarray, float]:
    """([N,2] the router's need: lower, the cheap answer suffices; the shift back to confidence).
    Need is kept at 1 or more so that the router's 0, "nothing cheaper is safe", keeps its meaning."""
    confidence = np.clip(confidence, -1e6, 1e6)  # an empty answer's -inf among them
    shift = float(confidence.max()) + 1.0
    need = np.zeros((len(confidence), 2))
    need[:, 0] = shift - confidence
    return need, shift


def _right(cheap_good, strong_good) -> np.ndarray:
    cheap = np.asarray(cheap_good, bool)
    strong = np.ones(len(cheap), bool) if strong_good is None else np.array(
        [True if s is None else bool(s) for s in strong_good], bool)
    return np.stack([cheap, strong], 1)


def calibrate_threshold(confidence: Sequence[float], cheap_good: Sequence[bool],
                        strong_good: Sequence[bool | None] | None = None, target: float = DEFAULT_TARGET) -> float:
    """The confidence at or above which the cheap answer is kept for `target`; +inf (always escalate)
    when no verdicts or nothing cheaper is safe."""
    confidence = np.asarray(confidence, float)
    if len(confidence) < 2:
        return float("inf")
    need, shift = _as_need(confidence)
    thresholds = calibrate(need, _right(cheap_good, strong_good), IN_PLAY, TARGETS)
    t = threshold_for(TARGETS, thresholds, target)
    return shift - t if t > 0 else float("inf")


def replayed(threshold: float, confidence, cheap_good, strong_good=None) -> dict:
    """What a threshold does on verdicts: the escalated share and the quality reached."""
    keep = np.asarray(confidence, float) >= threshold
    right = _right(cheap_good, strong_good)
    return {"escalated": round(float(np.mean(~keep)), 4) if len(keep) else 0.0,
            "quality": float(np.mean(np.where(keep, right[:, 0], right[:, 1]))) if len(keep) else 0.0}


def _meets(result: dict, right: np.ndarray, target: float) -> bool:
    known = np.where(right, PASS, FAIL).astype(np.int8)
    data = Outcomes(known, np.zeros(known.shape), IN_PLAY)
    return meets_target(result, data, target)


def guard(serving: float, candidate: float, confidence, cheap_good, strong_good=None,
          target: float = DEFAULT_TARGET) -> dict:
    """Whether `candidate` may replace `serving`, replayed on held-out verdicts."""
    right = _right(cheap_good, strong_good)
    s, c = (replayed(t, confidence, cheap_good, strong_good) for t in (serving, candidate))
    target_met = len(right) > 0 and _meets(c, right, target)
    serving_met = len(right) > 0 and _meets(s, right, target)
    accepted = target_met and (c["escalated"] <= s["escalated"] + 1e-9 or not serving_met)
    return {"heldout": len(right), "serving": s, "candidate": c, "target_met": target_met, "accepted": accepted}
