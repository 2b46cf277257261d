"""`python -m benchmarks.classifier`: the shipped complexity classifier on the held-out-author
set (benchmarks/data/heldout_authors.jsonl, written separately and never trained or
calibrated on), an outcome simulation (benchmarks/classifier_outcomes.py) on a synthetic stress set and
on real answers of our two shipped models (benchmarks/classifier_real_outcomes.py), and
single-request latency. Last stdout line: one JSON object.

Goals (issues 12 and 30): under-routing (true tier >= 3 routed to tier 1) <= 3%, macro-F1 >= 0.75,
tier-2 recall >= 0.6, APGR >= 0.70 after 20% of the outcomes, latency p99 <= 3 ms (also with a
full outcome memory and every level's outcome model fitted, and for 4 KB prompts of a tenant with
a full memory of its own beside it).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

from classifier.dataset import load_splits, read_jsonl
from classifier.features import extract_many
from classifier.metrics import macro_f1
from classifier.outcome_fit import TENANT_ROWS, fit
from classifier.outcome_model import CAPACITY
from classifier.runtime import ComplexityClassifier
from classifier.static_vectors import DIMS

from . import classifier_outcomes

HELDOUT_AUTHORS = Path(__file__).resolve().parent / "data" / "heldout_authors.jsonl"
LATENCY_REQUESTS = 2000
LATENCY_MAX_CHARS = 2000
FOUR_KB = 4096  # the decision latency goal's prompt (issue 53)
TENANT = "bench"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def routing_report(clf: ComplexityClassifier, rows: list[dict]) -> dict:
    labels = np.array([r["tier"] for r in rows])
    preds = clf.predict_many(rows)
    routed = np.array([p.tier for p in preds])
    argmax = np.array([int(np.argmax(p.probs)) + 1 for p in preds])
    hard = labels >= 3
    return {
        "rows": len(rows),
        "macro_f1": round(macro_f1(labels, routed), 4),
        "recall_per_tier": {str(t): round(float(np.mean(routed[labels == t] == t)), 4) for t in (1, 2, 3, 4)},
        "under_routing_rate": round(float(np.mean(routed[hard] == 1)), 4),
        "share_per_tier": {str(t): round(float(np.mean(routed == t)), 4) for t in (1, 2, 3, 4)},
        "macro_f1_argmax": round(macro_f1(labels, argmax), 4),
    }


def latency(clf: ComplexityClassifier, rows: list[dict], n: int, tenant: str | None = None) -> dict:
    times = []
    for i in range(n + 20):
        row = rows[i % len(rows)]
        t0 = time.perf_counter()
        clf.predict(messages=row.get("messages"), prompt=row.get("prompt"), tenant=tenant)
        if i >= 20:  # the first calls warm caches
            times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1e3
    return {"p50": round(float(np.percentile(ms, 50)), 4), "p99": round(float(np.percentile(ms, 99)), 4),
            "requests": n, "max_chars": LATENCY_MAX_CHARS}


def _clipped(row: dict) -> dict:
    """The request with its last turn cut to LATENCY_MAX_CHARS (the latency goal's bound)."""
    if "prompt" in row:
        return {"prompt": row["prompt"][:LATENCY_MAX_CHARS]}
    msgs = [dict(m) for m in row["messages"]]
    msgs[-1]["content"] = str(msgs[-1].get("content") or "")[:LATENCY_MAX_CHARS]
    return {"messages": msgs}


def _full_outcomes(clf: ComplexityClassifier, requests: list[dict]):
    """The serving worst case: every level's p_good and gain fitted, the n-gram model, the shared
    similarity memory at capacity and tenant TENANT's at its own (a request of TENANT reads both)."""
    rows = CAPACITY + TENANT_ROWS
    texts, numeric = extract_many(requests)
    reps = -(-rows // len(requests))
    probs = np.tile(clf.probabilities(texts, numeric), (reps, 1))[:rows]
    numeric, texts = np.tile(numeric, (reps, 1))[:rows], (texts * reps)[:rows]
    known = np.random.default_rng(0).integers(0, 2, size=(rows, 4)).astype(np.int8)
    return fit(numeric, probs, known, DIMS, texts=texts, owners=[""] * CAPACITY + [TENANT] * TENANT_ROWS)


def _four_kb(rows: list[dict]) -> list[dict]:
    """Prompts of 4,096 characters: each request's text, then the next ones', until that long."""
    texts = [r.get("prompt") or str(r["messages"][-1].get("content") or "") for r in rows]
    out = []
    for i in range(len(texts)):
        text, j = texts[i], i
        while len(text) < FOUR_KB:
            j += 1
            text += "\n\n" + texts[j % len(texts)]
        out.append({"prompt": text[:FOUR_KB]})
    return out


def _apgr_at_20pct(curve: dict | None) -> float | None:
    """The new model's mean APGR after learning from 20% of an outcome set."""
    row = (curve or {}).get("by_labels", {}).get("20%")
    return row["new_gain"]["apgr"]["mean"] if row else None


def main(skip_simulation: bool = False) -> dict:
    clf = ComplexityClassifier.load()
    held = read_jsonl(HELDOUT_AUTHORS)
    log(f"model {clf.version}; held-out-author set: {len(held)} rows")
    result = {"model_version": clf.version, "thresholds": clf.metadata.get("thresholds"),
              "heldout_authors": routing_report(clf, held),
              "own_test_split": routing_report(clf, load_splits()["test"])}
    requests = [_clipped(r) for r in held + load_splits()["test"]]
    random.Random(1).shuffle(requests)
    log(f"latency: {LATENCY_REQUESTS} single requests")
    result["latency_ms"] = latency(clf, requests, LATENCY_REQUESTS)
    log(f"latency with a full outcome memory ({CAPACITY} rows) and fitted models")
    learned = clf.with_outcomes(_full_outcomes(clf, requests))
    result["latency_ms_full_outcomes"] = latency(learned, requests, LATENCY_REQUESTS)
    log("latency of 4 KB prompts with the full outcome memory")
    four_kb = _four_kb(requests)
    result["latency_ms_4kb_full_outcomes"] = {**latency(learned, four_kb, LATENCY_REQUESTS), "max_chars": FOUR_KB}
    log(f"the same for a tenant with its own full memory ({TENANT_ROWS} rows) beside the shared one")
    result["latency_ms_4kb_tenant_outcomes"] = {**latency(learned, four_kb, LATENCY_REQUESTS, TENANT),
                                                "max_chars": FOUR_KB}
    if not skip_simulation:
        result["outcome_simulation"] = classifier_outcomes.main(["--real-answers"])["sets"]
    h = result["heldout_authors"]
    sims = result.get("outcome_simulation", {})
    sim20 = _apgr_at_20pct(sims.get("synthetic_stress"))
    real20 = _apgr_at_20pct(sims.get("real_answers"))
    result["goals"] = {
        "under_routing_le_3pct": h["under_routing_rate"] <= 0.03, "macro_f1_ge_0_75": h["macro_f1"] >= 0.75,
        "tier2_recall_ge_0_6": h["recall_per_tier"]["2"] >= 0.6,
        "apgr_after_20pct_ge_0_70": sim20 >= 0.70 if sim20 is not None else None,
        "apgr_after_20pct_real_answers_ge_0_70": real20 >= 0.70 if real20 is not None else None,
        "latency_p99_le_3ms": max(result[k]["p99"] for k in ("latency_ms", "latency_ms_full_outcomes",
                                                              "latency_ms_4kb_full_outcomes",
                                                              "latency_ms_4kb_tenant_outcomes")) <= 3.0}
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.classifier")
    parser.add_argument("--skip-simulation", action="store_true", help="no outcome retraining (fast)")
    print(json.dumps(main(parser.parse_args().skip_simulation)))
