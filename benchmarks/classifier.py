"""`python -m benchmarks.classifier`: accuracy, routing economics and latency of the shipped
complexity classifier. Last stdout line: one JSON object.

Economics use the default config's tier prices (classifier/economics.py explains the cost
model). Latency is one request at a time through `ComplexityClassifier.predict`
(features + ONNX), then the same plus a MiniLM embedding through onnxruntime.
"""
from __future__ import annotations

import json
import random
import sys
import time

import numpy as np

from classifier import economics as econ
from classifier.dataset import load_splits
from classifier.evaluation import evaluate_rows, probabilities
from classifier.runtime import ComplexityClassifier

LATENCY_REQUESTS = 2000
EMBEDDING_REQUESTS = 200
# A plausible production mix (most traffic is easy), for an extra economics figure.
TRAFFIC_MIX = {1: 0.5, 2: 0.3, 3: 0.15, 4: 0.05}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ms = np.array(samples) * 1e3
    return round(float(np.percentile(ms, 50)), 4), round(float(np.percentile(ms, 99)), 4)


def _latency(clf: ComplexityClassifier, rows: list[dict], n: int, embedder=None) -> list[float]:
    times = []
    for i in range(n + 20):
        row = rows[i % len(rows)]
        t0 = time.perf_counter()
        if embedder is not None:
            text = row.get("prompt") or row["messages"][-1]["content"]
            embedder.embed(text)
        clf.predict(messages=row.get("messages"), prompt=row.get("prompt"))
        if i >= 20:  # the first calls warm caches
            times.append(time.perf_counter() - t0)
    return times


def _mix_indices(labels: np.ndarray, size: int = 2000, seed: int = 7) -> np.ndarray:
    rng = random.Random(seed)
    by_tier = {t: np.flatnonzero(labels == t).tolist() for t in TRAFFIC_MIX}
    return np.array([rng.choice(by_tier[t]) for t, share in TRAFFIC_MIX.items() for _ in range(int(size * share))])


def main() -> dict:
    clf = ComplexityClassifier.load()
    splits = load_splits()
    prices = econ.tier_prices()
    log(f"model {clf.version}; evaluating test ({len(splits['test'])}) and heldout ({len(splits['heldout'])}) rows")
    test_probs = probabilities(clf, splits["test"])
    test = evaluate_rows(clf, splits["test"], prices, test_probs)
    held = evaluate_rows(clf, splits["heldout"], prices)
    labels = np.array([r["tier"] for r in splits["test"]])
    idx = _mix_indices(labels)
    mixed = evaluate_rows(clf, [splits["test"][i] for i in idx], prices, test_probs[idx])

    requests = splits["test"] + splits["heldout"]
    random.Random(1).shuffle(requests)
    log(f"latency: {LATENCY_REQUESTS} single requests")
    p50, p99 = _percentiles(_latency(clf, requests, LATENCY_REQUESTS))
    try:
        from classifier.embeddings import MiniLMEmbedder
        log(f"latency with MiniLM embeddings (onnxruntime): {EMBEDDING_REQUESTS} single requests")
        e50, e99 = _percentiles(_latency(clf, requests, EMBEDDING_REQUESTS, MiniLMEmbedder()))
    except Exception as exc:  # noqa: BLE001 - report why the optional path could not run
        log(f"embedding path unavailable: {exc}")
        e50 = e99 = None
    stats = clf.metadata.get("dataset", {})
    return {
        "macro_f1": test["macro_f1"],
        "macro_f1_heldout_templates": held["macro_f1"],
        "recall_per_tier": test["recall_per_tier"],
        "recall_per_tier_heldout_templates": held["recall_per_tier"],
        "under_routing_rate": test["calibrated"]["under_routing_rate"],
        "under_routing_rate_heldout_templates": held["calibrated"]["under_routing_rate"],
        "cost_reduction_at_95": test["cost_reduction_at_95"],
        "random_cost_reduction_at_95": test["random_cost_reduction_at_95"],
        "oracle_cost_reduction_at_95": test["oracle_cost_reduction_at_95"],
        "apgr": test["apgr"],
        "calibrated_operating_point": {"test": test["calibrated"], "heldout_templates": held["calibrated"]},
        "heldout_templates": {k: held[k] for k in ("cost_reduction_at_95", "oracle_cost_reduction_at_95",
                                                    "random_cost_reduction_at_95", "apgr")},
        "traffic_mix": {"mix": TRAFFIC_MIX, **{k: mixed[k] for k in (
            "cost_reduction_at_95", "oracle_cost_reduction_at_95", "random_cost_reduction_at_95", "apgr")}},
        "latency_ms_p50": p50,
        "latency_ms_p99": p99,
        "latency_ms_p50_embeddings": e50,
        "latency_ms_p99_embeddings": e99,
        "latency_requests": LATENCY_REQUESTS,
        "latency_requests_embeddings": EMBEDDING_REQUESTS,
        "embeddings_used_by_model": False,
        "dataset": {k: stats.get(k) for k in ("templates", "domains", "heldout_domains", "heldout_templates",
                                              "validation_templates", "rows", "label_distribution")},
        "model_version": clf.version,
    }


if __name__ == "__main__":
    print(json.dumps(main()))
