"""`python -m benchmarks.classifier_outcomes [--outcomes FILE ...]`: routing between the cheapest and
the top level of an outcome set, learned from 50, 100, 300, 1,000 labels and 20% of the set.

Scored as the RouteLLM paper scores routers: the k requests with the highest score go to the
strong level, k = 0..N. PGR(k) is the share of the quality gap (always weak -> always strong)
recovered; APGR is its mean over k; CPT(x) the least share of strong calls reaching PGR x;
savings at 95% the share of strong calls saved at 95% of the strong level's quality. Each figure
is the mean over 5 random splits (labels drawn from the set, the rest scored) with a 95%
t-interval. Ties are broken at random, so a constant score (always-cheap) scores as random.

Rows: random; always-cheap and always-strong (points, not curves); today's model zero-shot
(the classifier's P(level above the weak one)) and after learning (1 - p_good of the weak level,
the target before issue 53); the new model (need: P(strong right AND weak wrong)); the ablation
of the target (P(weak fails) on the new model's features); and the new model's parts alone.
With `--knn-table FILE` (a token table like classifier/model/static_vectors.npy, e.g. 256
dimensions from `python -m classifier.static_vectors_build --dims 256 --out DIR`), two more rows:
the new model and its nearest outcomes alone with the memory on that table instead (the fitted
stages unchanged). The method is frozen here; outcome sets the project did not build are scored
with it as it is. Last stdout line: one JSON object.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from classifier.dataset import load_splits
from classifier.features import extract_many
from classifier.outcome_fit import fit
from classifier.outcome_model import PASS, UNKNOWN, OutcomeMemory, OutcomeModel, known_levels
from classifier.outcomes import read_outcome_lines
from classifier.router_scores import curve_metrics, fixed_point, summary
from classifier.runtime import ComplexityClassifier
from classifier.static_vectors import DIMS, StaticVectors
from classifier.textnorm import split_request

LABELS = (50, 100, 300, 1000, "20%")
SPLITS = 5
MIN_SCORED = 100  # a label count that leaves fewer rows to score is skipped
SETS_DIR = Path(__file__).resolve().parent / "data"


def log(message: str) -> None:
    print(f"[classifier_outcomes] {message}", file=sys.stderr, flush=True)


def _text(row: dict) -> str:
    return row.get("prompt") or row["messages"][-1]["content"]


def synthetic_stress_set() -> list[dict]:
    """A deployment whose weak tier cannot answer in languages other than English, and whose
    strong tier fails a third of expert requests: difficulty the rubric's labels do not carry.
    Built from our own test and held-out-template splits (never the held-out-author set)."""
    splits = load_splits()
    out = []
    for row in splits["test"] + splits["heldout"]:
        roll = int(hashlib.sha256(_text(row).encode()).hexdigest()[:6], 16) / 16**6
        weak = row["tier"] <= 2 and _text(row).isascii()
        strong = row["tier"] <= 3 or roll < 0.67
        out.append({k: row[k] for k in ("messages", "prompt") if k in row} | {"outcomes": {"1": weak, "4": strong}})
    return out


# -- the routers --------------------------------------------------------------------------------

class OutcomeSet:
    """An outcome file's rows that know both the weak (lowest) and the strong (highest) level,
    with the classifier's inputs extracted once."""

    def __init__(self, name: str, requests: list[dict], levels: list[dict[int, bool]], clf: ComplexityClassifier,
                 knn_table: StaticVectors | None = None):
        named = sorted({lv for row in levels for lv in row})
        self.name, self.weak_level, self.strong_level = name, named[0], named[-1]
        known = np.stack([known_levels(lv) for lv in levels])
        both = (known[:, self.weak_level - 1] != UNKNOWN) & (known[:, self.strong_level - 1] != UNKNOWN)
        self.requests = [r for r, keep in zip(requests, both) if keep]
        self.known = known[both]
        self.texts, self.numeric = extract_many(self.requests)
        self.numeric = self.numeric.astype(np.float64)
        self.probs = clf.probabilities(self.texts, self.numeric).astype(np.float64)
        self.weak = (self.known[:, self.weak_level - 1] == PASS).astype(float)
        self.strong = (self.known[:, self.strong_level - 1] == PASS).astype(float)
        # the task as the static vector reads it, on the other table (--knn-table)
        self.knn = None if knn_table is None else np.stack(
            [knn_table.embed(split_request(r.get("messages"), r.get("prompt"))[0]) for r in self.requests])

    def __len__(self) -> int:
        return len(self.known)

    def about(self) -> dict:
        both_right = float(np.mean((self.weak == 1) & (self.strong == 1)))
        return {"rows": len(self), "levels": [self.weak_level, self.strong_level],
                "weak_accuracy": round(float(self.weak.mean()), 4), "strong_accuracy": round(float(self.strong.mean()), 4),
                "only_strong_right": round(float(np.mean((self.weak == 0) & (self.strong == 1))), 4),
                "both_right": round(both_right, 4)}


def model_scores(data: OutcomeSet, train: np.ndarray, test: np.ndarray, target: str, texts: bool,
                  parts: str = "all") -> np.ndarray:
    """need at the weak level (target gain or fail) from a model fitted on the train rows."""
    model = fit(data.numeric[train], data.probs[train], data.known[train], DIMS,
                texts=[data.texts[i] for i in train] if texts else None, target=target)
    if parts == "neighbours":  # the nearest outcomes on the classifier's prior alone
        model = OutcomeModel(model.memory, (None,) * 4, model.mean, model.scale, top=model.top, target=target)
    elif parts in ("knn_table", "knn_table_alone"):  # the same stages, the memory on the other table
        memory = OutcomeMemory.empty(data.knn.shape[1]).plus(data.knn[train], data.known[train], len(train))
        model = replace(model, memory=memory) if parts == "knn_table" else \
            OutcomeModel(memory, (None,) * 4, model.mean, model.scale, top=model.top, target=target)
        return model.assess(data.numeric[test], data.probs[test], DIMS, [data.texts[i] for i in test],
                            queries=data.knn[test]).need[:, data.weak_level - 1]
    elif parts == "fitted":  # no nearest outcomes
        model = OutcomeModel(OutcomeMemory.empty(DIMS), model.fits, model.mean, model.scale, model.gain_fits,
                             model.grams, model.top, target)
    a = model.assess(data.numeric[test], data.probs[test], DIMS, [data.texts[i] for i in test])
    if parts == "grams":  # no n-gram model (too few gains among the labels): no ranking, a random order
        grams = model.grams.logits([data.texts[i] for i in test]) if model.grams is not None else np.zeros((len(test), 4))
        return grams[:, data.weak_level - 1]
    return a.need[:, data.weak_level - 1]


def _today_learned(data: OutcomeSet, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    model = fit(data.numeric[train], data.probs[train], data.known[train], DIMS, target="fail")
    return 1.0 - model.assess(data.numeric[test], data.probs[test], DIMS).p_good[:, data.weak_level - 1]


ROUTERS = {
    "random": lambda d, tr, te, rng: rng.random(len(te)),
    "today_zero_shot": lambda d, tr, te, rng: 1.0 - np.cumsum(d.probs[te], 1)[:, d.weak_level - 1],
    "today_learned": lambda d, tr, te, rng: _today_learned(d, tr, te),
    "new_gain": lambda d, tr, te, rng: model_scores(d, tr, te, "gain", True),
    "ablation_fail_same_features": lambda d, tr, te, rng: model_scores(d, tr, te, "fail", True),
    "part_no_grams": lambda d, tr, te, rng: model_scores(d, tr, te, "gain", False),
    "part_neighbours_only": lambda d, tr, te, rng: model_scores(d, tr, te, "gain", False, "neighbours"),
    "part_no_neighbours": lambda d, tr, te, rng: model_scores(d, tr, te, "gain", True, "fitted"),
    "part_grams_only": lambda d, tr, te, rng: model_scores(d, tr, te, "gain", True, "grams"),
}
KNN_TABLE_ROUTERS = {
    "new_gain_knn_table": lambda d, tr, te, rng: model_scores(d, tr, te, "gain", True, "knn_table"),
    "part_neighbours_only_knn_table": lambda d, tr, te, rng: model_scores(d, tr, te, "gain", False, "knn_table_alone"),
}


def label_counts(n: int) -> list[tuple[str, int]]:
    counts = [(str(c), c) if isinstance(c, int) else (c, int(n * float(c[:-1]) / 100)) for c in LABELS]
    return [(name, c) for name, c in counts if c >= 10 and n - c >= MIN_SCORED]


def label_curve(data: OutcomeSet, routers: dict = ROUTERS, splits: int = SPLITS) -> dict:
    """Per label count: each router's figures over `splits` random splits."""
    out = {"set": data.about(), "by_labels": {}}
    for name, count in label_counts(len(data)):
        runs: dict[str, list[dict]] = {r: [] for r in [*routers, "always_cheap", "always_strong"]}
        for split in range(splits):
            rng = np.random.default_rng(1000 * split + count)
            perm = rng.permutation(len(data))
            train, test = perm[:count], perm[count:]
            weak, strong = data.weak[test], data.strong[test]
            for router, score in routers.items():
                runs[router].append(curve_metrics(score(data, train, test, rng), weak, strong, rng))
            runs["always_cheap"].append(fixed_point(weak, strong, False))
            runs["always_strong"].append(fixed_point(weak, strong, True))
        out["by_labels"][name] = {"labels": count, **{r: summary(v) for r, v in runs.items()}}
        log(f"{data.name}: {name} labels: " + ", ".join(
            f"{r} {out['by_labels'][name][r]['apgr']['mean']:.3f}" for r in routers))
    return out


def table(result: dict) -> str:
    """Markdown: APGR / savings at 95% per router and label count (means)."""
    counts = list(result["by_labels"])
    routers = list(result["by_labels"][counts[0]])[1:]
    lines = ["| router | " + " | ".join(f"{c} labels" for c in counts) + " |", "|---" * (len(counts) + 1) + "|"]
    for r in routers:
        cells = []
        for c in counts:
            row = result["by_labels"][c][r]
            apgr, save = row["apgr"], row["save95"]
            cells.append(f"{apgr['mean']:.3f} / {save['mean']:.0%}" if save else f"{apgr['mean']:.3f} / -")
        lines.append(f"| {r} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def set_name(path: Path) -> str:
    """A file called outcomes.jsonl is named by its folder."""
    return path.parent.name if path.stem == "outcomes" else path.stem


def project_sets() -> dict[str, Path]:
    """Outcome files the project built: benchmarks/data/**/outcomes*.jsonl."""
    return {set_name(p): p for p in sorted(SETS_DIR.glob("**/outcomes*.jsonl"))}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.classifier_outcomes")
    parser.add_argument("--outcomes", action="append", default=[], help="outcome JSONL (repeatable; default: the "
                        "project's sets in benchmarks/data and the synthetic stress set)")
    parser.add_argument("--real-answers", action="store_true", help="also the checkable questions answered by the "
                        "shipped models (benchmarks/classifier_real_outcomes.py; minutes the first time)")
    parser.add_argument("--splits", type=int, default=SPLITS)
    parser.add_argument("--knn-table", type=Path, help="a token table (.npy) for the nearest outcomes' memory: "
                        "two more rows")
    args = parser.parse_args(argv)
    knn_table = StaticVectors(np.load(args.knn_table)) if args.knn_table else None
    clf = ComplexityClassifier.load()
    named = {set_name(Path(p)): Path(p) for p in args.outcomes} or project_sets()
    sets = {name: read_outcome_lines(p) for name, p in named.items()}
    if not args.outcomes:
        stress = synthetic_stress_set()
        sets["synthetic_stress"] = ([{k: r[k] for k in ("messages", "prompt") if k in r} for r in stress],
                                    [{int(k): v for k, v in r["outcomes"].items()} for r in stress])
    if args.real_answers:
        from .classifier_real_outcomes import build

        real = build()[0]
        sets["real_answers"] = ([{"prompt": r["prompt"]} for r in real],
                                [{int(k): v for k, v in r["outcomes"].items()} for r in real])
    result = {"benchmark": "classifier_outcomes", "splits": args.splits, "sets": {}}
    for name, (requests, levels) in sets.items():
        data = OutcomeSet(name, requests, levels, clf, knn_table)
        log(f"{name}: {data.about()}")
        result["sets"][name] = label_curve(data, ROUTERS | (KNN_TABLE_ROUTERS if knn_table else {}), args.splits)
        print(f"\n{name} (APGR / savings at 95%, mean of {args.splits} splits)\n{table(result['sets'][name])}",
              file=sys.stderr)
    return result


if __name__ == "__main__":
    print(json.dumps(main(), separators=(",", ":")))
