"""Outcome simulation for `python -m benchmarks.classifier`: feed 5/10/20% of an outcome set
through `train --outcomes` and measure routing between a weak (level 1) and a strong
(level 4) tier on the rest, before and after.

APGR: the area under the "performance gap recovered" curve when the requests with the
highest P(tier >= 2) go to the strong tier, over strong shares 0..1 (random routing: 0.5).
"""
from __future__ import annotations

import hashlib
import json
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np

from classifier.dataset import load_splits
from classifier.runtime import PACKAGED_MODEL_DIR, ComplexityClassifier

FRACTIONS = (0.05, 0.10, 0.20)
SHARES = np.linspace(0, 1, 101)


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


def apgr_and_share(scores: np.ndarray, weak: np.ndarray, strong: np.ndarray) -> tuple[float, float]:
    order = np.argsort(-scores, kind="stable")
    n, qw, qs = len(scores), weak.mean(), strong.mean()
    quality = []
    for share in SHARES:
        k = int(round(share * n))
        routed_strong = np.zeros(n, bool)
        routed_strong[order[:k]] = True
        quality.append(np.where(routed_strong, strong, weak).mean())
    quality = np.array(quality)
    gap = qs - qw
    pgr = (quality - qw) / gap if gap > 0 else np.ones_like(quality)
    apgr = float(np.mean((pgr[1:] + pgr[:-1]) / 2))
    need = SHARES[np.argmax(quality >= 0.95 * qs)] if np.any(quality >= 0.95 * qs) else 1.0
    return round(apgr, 4), round(float(need), 4)


def _route_scores(model_dir: str | Path | None, rows: list[dict]) -> np.ndarray:
    """P(the weak tier is not good enough): the strong tier goes to the highest first."""
    clf = ComplexityClassifier.load(model_dir)
    return np.array([1.0 - p.p_good[0] for p in clf.predict_many(rows)])


def simulate(outcome_rows: list[dict], log, seed: int = 3) -> dict:
    from classifier.pipeline import learn_outcomes, train  # scikit-learn: benchmark/training side only

    rows = list(outcome_rows)
    random.Random(seed).shuffle(rows)
    report = {"rows": len(rows)}
    with tempfile.TemporaryDirectory() as tmp:
        for frac in FRACTIONS:
            cut = int(len(rows) * frac)
            fed, rest = rows[:cut], rows[cut:]
            weak = np.array([r["outcomes"]["1"] for r in rest], float)
            strong = np.array([r["outcomes"]["4"] for r in rest], float)
            path = Path(tmp) / f"outcomes-{frac}.jsonl"
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in fed))
            log(f"outcome simulation: training with {cut} outcome rows ({frac:.0%})")
            train(None, Path(tmp) / f"model-{frac}", outcomes=[str(path)], progress=lambda _: None)
            before = apgr_and_share(_route_scores(None, rest), weak, strong)
            after = apgr_and_share(_route_scores(Path(tmp) / f"model-{frac}", rest), weak, strong)
            kept = Path(tmp) / f"kept-{frac}"  # the shipped classifier as it is, outcome models on top
            shutil.copytree(PACKAGED_MODEL_DIR, kept)
            learn_outcomes(kept, [str(path)])
            on_top = apgr_and_share(_route_scores(kept, rest), weak, strong)
            report[f"{int(frac * 100)}%"] = {
                "fed_rows": cut, "evaluated_rows": len(rest),
                "apgr_before": before[0], "apgr_after": after[0], "apgr_after_without_retraining": on_top[0],
                "strong_share_for_95pct_before": before[1], "strong_share_for_95pct_after": after[1],
                "strong_share_for_95pct_after_without_retraining": on_top[1]}
    return report
