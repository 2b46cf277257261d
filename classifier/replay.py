"""Replay: how a router would have done on requests whose outcomes are known.

A row's outcome at a level comes from its outcome line (classifier/outcome_model.known_levels); a
level the line leaves open counts as not good enough. Routing uses the levels "in play" (those an
outcome file names, or a deployment's tiers): a request decided for a level between them goes to
the next one up.

- quality: share of requests whose routed tier was good enough;
- cost_vs_top: cost against sending everything to the top level in play;
- APGR: the area under the share of the quality gap (always cheapest -> always top) recovered,
  against normalised cost, as one common threshold on P(level >= k) sweeps 0..1 (random: 0.5);
- strong_share_for_95pct: the least share sent to the top level that reaches 95% of its quality.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .decision import levels_from_probs
from .economics import gap_recovered
from .outcome_model import PASS, probs_from_p_good

SWEEP = np.linspace(0.0, 1.0, 201)
TARGET = 0.95  # of the top level's quality


@dataclass(frozen=True)
class Outcomes:
    known: np.ndarray  # [N,4] PASS / FAIL / UNKNOWN
    costs: np.ndarray  # [N,4] cost of each request at each level
    in_play: np.ndarray  # the tier levels requests can go to, ascending

    def __post_init__(self):
        if len(self.in_play) < 2:
            raise ValueError(f"replay needs outcomes for at least two tier levels, got {self.in_play.tolist()}")

    def placed(self, routed: np.ndarray) -> np.ndarray:
        """Each routed level moved up to the next level in play (capped at the top one)."""
        play = self.in_play
        return play[np.minimum(np.searchsorted(play, routed), len(play) - 1)]

    def score(self, routed: np.ndarray) -> tuple[float, float]:
        """(cost, quality) of routing request i to level routed[i]."""
        at = self.placed(np.asarray(routed)) - 1
        rows = np.arange(len(at))
        return float(self.costs[rows, at].sum()), float(np.mean(self.known[rows, at] == PASS))

    def fixed(self, level: int) -> tuple[float, float]:
        return self.score(np.full(len(self.known), level))


def routed_levels(p_good: np.ndarray, thresholds) -> np.ndarray:
    return levels_from_probs(probs_from_p_good(p_good), np.asarray(thresholds, float))


def curve(p_good: np.ndarray, data: Outcomes) -> list[tuple[float, float, float]]:
    """(cost, quality, top share) for each common threshold of the sweep."""
    top = data.in_play[-1]
    out = []
    for t in SWEEP:
        routed = data.placed(routed_levels(p_good, [t, t, t]))
        out.append((*data.score(routed), float(np.mean(routed == top))))
    return out


def apgr(points: list[tuple[float, float, float]], data: Outcomes, steps: int = 200) -> float:
    play = data.in_play
    low, top = data.fixed(play[0]), data.fixed(play[-1])
    if top[1] <= low[1] or top[0] <= low[0]:
        return 1.0  # the cheapest level is as good: nothing to recover
    return gap_recovered([(c, q) for c, q, _ in points], low, top, steps)


def at_target(points: list[tuple[float, float, float]], data: Outcomes, target: float = TARGET) -> dict:
    """The cheapest point of the sweep reaching `target` x the top level's quality."""
    top_c, top_q = data.fixed(data.in_play[-1])
    feasible = [(c, s) for c, q, s in points if q >= target * top_q - 1e-12] or [(top_c, 1.0)]
    cost, share = min(feasible)
    return {"strong_share_for_95pct": round(share, 4), "savings_at_95pct": round(1 - cost / top_c, 4)}


def report(p_good: np.ndarray, data: Outcomes, thresholds) -> dict:
    """One router on the data: at its operating point, and over the whole sweep."""
    routed = data.placed(routed_levels(p_good, thresholds))
    cost, quality = data.score(routed)
    points = curve(p_good, data)
    return {"tier_mix": {str(lv): round(float(np.mean(routed == lv)), 4) for lv in data.in_play},
            "quality": round(quality, 4), "cost_vs_top": round(cost / data.fixed(data.in_play[-1])[0], 4),
            "apgr": round(apgr(points, data), 4), **at_target(points, data)}


def random_report(data: Outcomes, target: float = TARGET) -> dict:
    """A label-blind mix of the cheapest and top levels in play, at the share reaching the target."""
    play = data.in_play
    (low_c, low_q), (top_c, top_q) = data.fixed(play[0]), data.fixed(play[-1])
    share = 1.0 if top_q <= low_q else float(np.clip((target * top_q - low_q) / (top_q - low_q), 0, 1))
    return {"tier_mix": {str(play[0]): round(1 - share, 4), str(play[-1]): round(share, 4)},
            "quality": round((1 - share) * low_q + share * top_q, 4),
            "cost_vs_top": round(((1 - share) * low_c + share * top_c) / top_c, 4), "apgr": 0.5,
            "strong_share_for_95pct": round(share, 4), "savings_at_95pct": round(1 - (1 - share) * low_c / top_c
                                                                                 - share, 4)}


def meets_target(result: dict, data: Outcomes, target: float, z: float = 1.645) -> bool:
    """Whether a router's quality at its operating point is not below `target` x the top level's by
    more than z standard errors of the held-out sample (small samples cannot refuse on noise alone)."""
    top_q = data.fixed(data.in_play[-1])[1]
    q, n = result["quality"], len(data.known)
    return bool(q + z * np.sqrt(max(q * (1 - q), 1e-12) / max(n, 1)) >= target * top_q)


def no_worse(candidate: dict, serving: dict) -> bool:
    """The guard's rule: at the same quality target (95% of the top level's) the candidate saves at
    least as much as the serving router, and over the whole cost range it recovers as much (APGR):
    on a small held-out set the first alone often ties."""
    return (candidate["savings_at_95pct"] >= serving["savings_at_95pct"] - 1e-9
            and candidate["apgr"] >= serving["apgr"] - 1e-9)


def replay_file(path, model_dir, candidate_dir=None, quality_target: float | None = None, config=None) -> dict:
    """`python -m classifier replay`: the serving router, a candidate and random on an outcome file."""
    from . import economics as econ
    from .outcome_model import known_levels
    from .outcomes import read_outcome_lines
    from .runtime import ComplexityClassifier

    requests, levels = read_outcome_lines(path)
    if not requests:
        raise ValueError(f"{path}: no outcome lines")
    known = np.stack([known_levels(lv) for lv in levels])
    in_play = np.array(sorted({level for lv in levels for level in lv}))
    # answer length is the same whoever writes it: price it at one length for every level
    data = Outcomes(known, econ.cost_matrix(requests, econ.tier_prices(config), np.full(len(requests), 4)), in_play)
    out = {"rows": len(requests), "levels_in_play": data.in_play.tolist(), "quality_target": quality_target}
    for name, folder in (("serving", model_dir), ("candidate", candidate_dir)):
        if name == "serving" or folder is not None:
            clf = ComplexityClassifier.load(folder)
            p_good = np.array([p.p_good for p in clf.predict_many(requests)])
            thresholds = [1 - quality_target] * 3 if quality_target is not None else \
                [clf.thresholds[k] for k in (2, 3, 4)]
            out[name] = {"model": str(folder) if folder else "packaged", **report(p_good, data, thresholds)}
    out["random"] = random_report(data)
    if candidate_dir is not None:
        out["candidate_no_worse"] = no_worse(out["candidate"], out["serving"])
    return out
