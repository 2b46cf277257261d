"""`python -m benchmarks.cascade_outcomes [--outcomes FILE] [--splits 5]`: the cascade (issue 54) against
pre-generation routing on the project's outcome set, per pair of levels (1 -> 2, 2 -> 4, 1 -> 4).

Three systems on each split's test rows, scored by classifier/cascade_scores.py: the gain router
of benchmarks/classifier_outcomes.py alone (fitted on the split's training rows), the cascade
alone (the cheap level answers every request; the lowest confidences, classifier/cascade_confidence.py,
are re-asked one level up), and both (the router's highest scores go straight up, the rest
cascade; the cascade off too). Each is a family of operating points; per split:
- save95: the share of strong calls saved at the cheapest point reaching 95% of the strong
  level's quality; cost_save95: the same point's cost against always-strong; save100 and
  cost_save100 the same at the strong level's full quality;
- APGR: the mean over strong-call shares 0..1 of the best quality gap recovered within that
  share; apgr_cost: the same over normalised cost (the cascade's cheap attempts count);
- accuracy at equal cost: the best accuracy within a budget, a share of the way from
  always-cheap's cost to always-strong's.
Cost model: the config's tier prices (config/tiergate.yaml) x the set's own token counts (the
request's input tokens as the gateway estimates them, the level's generated tokens); a cascade
always pays the cheap attempt, and an escalated request both. Figures are means over the splits
with a 95% t-interval; frontiers are read on the test rows as classifier_outcomes reads its curves.

The statistic is chosen on training rows only: every candidate below is scored as a cascade on
each split's training rows, and the split's pick is the best mean APGR over the pairs. The
threshold for 95% quality (classifier/cascade_calibration.py) is calibrated on the training rows
and replayed on the test rows. Last stdout line: one JSON object; progress on stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.classifier_outcomes import OutcomeSet, model_scores
from classifier.cascade_calibration import calibrate_threshold, replayed
from classifier.cascade_confidence import answer_confidence
from classifier.cascade_scores import compare, frontier_figures, operating_points
from classifier.economics import input_tokens, tier_prices
from classifier.router_scores import summary
from classifier.runtime import ComplexityClassifier

DEFAULT_SET = Path(__file__).resolve().parent / "data" / "outcome_set" / "outcomes.jsonl"
PAIRS = ((1, 2), (2, 4), (1, 4))
SPLITS = 5
TRAIN_SHARE = 0.5


def log(message: str) -> None:
    print(f"[cascade_outcomes] {message}", file=sys.stderr, flush=True)


def _margins(lp: np.ndarray, top: np.ndarray) -> np.ndarray:
    return top[:, 0] - top[:, 1] if top.ndim == 2 and top.shape[1] > 1 else np.zeros(len(lp))


def _neg_entropy(top: np.ndarray) -> np.ndarray:
    p = np.exp(top)
    p = p / p.sum(1, keepdims=True)
    return (p * np.log(np.maximum(p, 1e-300))).sum(1)


# each takes ([T] chosen logprobs, [T,5] top logprobs) of a non-empty answer; higher: surer
CANDIDATES = {
    "narrowest_margin (shipped)": lambda lp, top: answer_confidence(lp.tolist(), top.tolist()),
    "min": lambda lp, top: lp.min(),
    "mean": lambda lp, top: lp.mean(),
    "quantile_0.05": lambda lp, top: np.quantile(lp, 0.05),
    "quantile_0.1": lambda lp, top: np.quantile(lp, 0.1),
    "quantile_0.25": lambda lp, top: np.quantile(lp, 0.25),
    "first_1": lambda lp, top: lp[0],
    "first_3_mean": lambda lp, top: lp[:3].mean(),
    "sum": lambda lp, top: lp.sum(),
    "sum_over_sqrt_len": lambda lp, top: lp.sum() / np.sqrt(len(lp)),
    "short_answer (-tokens)": lambda lp, top: -float(len(lp)),
    "margin_mean": lambda lp, top: _margins(lp, top).mean(),
    "margin_quantile_0.1": lambda lp, top: np.quantile(_margins(lp, top), 0.1),
    "neg_entropy_max": lambda lp, top: _neg_entropy(top).min(),
    "neg_entropy_mean": lambda lp, top: _neg_entropy(top).mean(),
    "narrowest_margin + 0.1 sum": lambda lp, top: _margins(lp, top).min() + 0.1 * lp.sum(),
    "narrowest_margin - 0.1 tokens": lambda lp, top: _margins(lp, top).min() - 0.1 * len(lp),
    "min + narrowest_margin": lambda lp, top: lp.min() + _margins(lp, top).min(),
}


# -- the outcome set ---------------------------------------------------------------------------------

def read_set(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if all(str(lv) in r["outcomes"] for pair in PAIRS for lv in pair)]


def level_costs(rows: list[dict], level: int, prices: dict[int, tuple[float, float]]) -> np.ndarray:
    pin, pout = prices[level]
    return np.array([input_tokens(r) * pin + r["tokens"][str(level)] * pout for r in rows], float) / 1e6


def statistic(rows: list[dict], level: int, fn) -> np.ndarray:
    out = []
    for r in rows:
        lp = np.asarray(r["logprobs"][str(level)], float)
        top = np.asarray(r["top_logprobs"][str(level)], float)
        out.append(float(fn(lp, top)) if len(lp) else float("-inf"))
    return np.asarray(out)


def _choose(stats: dict, outcomes: dict, train: np.ndarray, rng) -> tuple[str, dict]:
    """Each candidate as a cascade alone on the training rows: APGR per pair, and the best mean."""
    scores = {}
    for name, per_level in stats.items():
        scores[name] = {}
        for cheap, strong in PAIRS:
            w, s = outcomes[cheap][train], outcomes[strong][train]
            zero = np.zeros(len(train))
            points = operating_points(w, s, zero, zero + 1, zero, per_level[cheap][train], rng)["cascade"]
            scores[name][f"{cheap}->{strong}"] = frontier_figures(points, w, s, zero, zero + 1)["apgr"]
    best = max(scores, key=lambda k: np.mean(list(scores[k].values())))
    return best, scores


def _signal(confidence: np.ndarray, weak: np.ndarray, strong: np.ndarray) -> dict:
    """ROC AUC of the confidence for the cheap answer being right, and of low confidence for a gain
    (the next level right where the cheap one was wrong): what a cascade needs is the second."""
    from sklearn.metrics import roc_auc_score

    gain = (strong > 0) & (weak == 0)
    return {"auc_cheap_right": float(roc_auc_score(weak > 0, confidence)) if 0 < weak.mean() < 1 else None,
            "auc_gain": float(roc_auc_score(gain, -confidence)) if 0 < gain.mean() < 1 else None}


def _pair_split(weak, strong, cost_cheap, cost_strong, confidence, router, train, test, rng) -> dict:
    """One pair on one split: the systems' figures, the confidence's signal, and the threshold
    calibrated on the training rows replayed on the test rows."""
    out = compare(weak[test], strong[test], cost_cheap[test], cost_strong[test], router, confidence[test], rng)
    out["signal"] = _signal(confidence[test], weak[test], strong[test])
    tau = calibrate_threshold(confidence[train], weak[train] > 0, strong[train] > 0)
    r = replayed(tau, confidence[test], weak[test] > 0, strong[test] > 0)
    out["calibrated"] = {"escalated": r["escalated"], "quality_vs_strong": r["quality"] / max(strong[test].mean(), 1e-12),
                         "threshold": min(tau, 1e6)}
    return out


def run(path: Path = DEFAULT_SET, splits: int = SPLITS) -> dict:
    started = time.monotonic()
    rows = read_set(path)
    prices = tier_prices()
    clf = ComplexityClassifier.load()
    requests = [{"messages": r["messages"]} for r in rows]
    outcomes = {lv: np.array([r["outcomes"][str(lv)] for r in rows], float) for lv in (1, 2, 4)}
    costs = {lv: level_costs(rows, lv, prices) for lv in (1, 2, 4)}
    cheap_levels = sorted({c for c, _ in PAIRS})
    stats = {name: {lv: statistic(rows, lv, fn) for lv in cheap_levels} for name, fn in CANDIDATES.items()}
    shipped = stats["narrowest_margin (shipped)"]
    # the router learns a pair as the weak and top level of an outcome set
    sets = {(c, s): OutcomeSet(f"{c}->{s}", requests, [{1: bool(r["outcomes"][str(c)]), 4: bool(r["outcomes"][str(s)])}
                                                         for r in rows], clf) for c, s in PAIRS}
    runs = {f"{c}->{s}": {"router": [], "cascade": [], "router+cascade": [], "calibrated": [], "signal": []}
            for c, s in PAIRS}
    picks, train_apgr = [], []
    for split in range(splits):
        rng = np.random.default_rng(1000 * split + 54)
        perm = rng.permutation(len(rows))
        train, test = perm[:int(TRAIN_SHARE * len(rows))], perm[int(TRAIN_SHARE * len(rows)):]
        pick, scores = _choose(stats, outcomes, train, rng)
        picks.append(pick)
        train_apgr.append(scores)
        for (cheap, strong), data in sets.items():
            router = model_scores(data, train, test, "gain", True)
            split_figures = _pair_split(outcomes[cheap], outcomes[strong], costs[cheap], costs[strong], shipped[cheap],
                                        router, train, test, rng)
            for name, f in split_figures.items():
                runs[f"{cheap}->{strong}"][name].append(f)
        log(f"split {split + 1}/{splits}: statistic picked on training rows: {pick}; "
            f"{time.monotonic() - started:.1f}s")
    pairs = {}
    for (cheap, strong), data in sets.items():
        key = f"{cheap}->{strong}"
        pairs[key] = {"set": data.about() | {"levels": [cheap, strong]},
                      **{name: summary(v) for name, v in runs[key].items()}}
        tau = calibrate_threshold(shipped[cheap], outcomes[cheap] > 0, outcomes[strong] > 0)
        pairs[key]["threshold_all_rows"] = tau if np.isfinite(tau) else None  # None: always escalate
    candidates = {name: {p: round(float(np.mean([s[name][p] for s in train_apgr])), 4) for p in train_apgr[0][name]}
                  for name in CANDIDATES}
    return {"benchmark": "cascade_outcomes", "set": str(path), "rows": len(rows), "splits": splits,
            "train_share": TRAIN_SHARE, "cost_model": "config tier prices x the set's token counts",
            "statistic_picks_on_training_rows": picks, "candidates_train_apgr": candidates,
            "default_threshold": pairs["2->4"]["threshold_all_rows"], "pairs": pairs,
            "seconds": round(time.monotonic() - started, 1)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cascade_outcomes")
    parser.add_argument("--outcomes", type=Path, default=DEFAULT_SET)
    parser.add_argument("--splits", type=int, default=SPLITS)
    args = parser.parse_args(argv)
    if args.splits < 2:
        parser.error("--splits: at least 2 (the intervals need them)")
    return run(args.outcomes, args.splits)


if __name__ == "__main__":
    print(json.dumps(main(), separators=(",", ":")))
