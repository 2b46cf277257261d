"""`python -m benchmarks.classifier_encoder`: would the real MiniLM encoder pay as the outcome models' second stage?

Issue 30 asked to try the packaged MiniLM (ONNX, int8 if it keeps its quality) where the static
vectors carry too little meaning. This measures both sides of that trade:
- latency: one request's embedding, fp32 and dynamically quantised int8, at 200, 800 and 2,000
  characters on one core, against the classifier's 3 ms p99 budget;
- fidelity: the least cosine between int8 and fp32 vectors over a few sentences;
- routing: the outcome simulation of benchmarks/classifier_outcomes.py (learn from 5/10/20%,
  APGR and the strong share for 95% quality on the rest) with the nearest-outcome stage reading
  (a) the static task vector, as shipped, (b) the MiniLM vector in its place, (c) both, the
  neighbours found by MiniLM; on the synthetic stress set and on our models' real answers.
The last stdout line is one JSON object. The decision it informed is in docs/routing.md.
"""
from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from classifier.embeddings import MiniLMEmbedder, export_onnx
from classifier.features import extract_many
from classifier.outcome_fit import fit
from classifier.outcome_model import known_levels
from classifier.runtime import ComplexityClassifier
from classifier.static_vectors import DIMS

from .classifier_outcomes import curve_metrics, synthetic_stress_set
from .classifier_real_outcomes import build as real_outcomes

FRACTIONS = (0.05, 0.10, 0.20)
MINILM_DIMS = 384
WORDS = "the router sends each request to the cheapest tier able to answer it well and learns from outcomes".split()


def log(message: str) -> None:
    print(f"[classifier-encoder] {message}", file=sys.stderr, flush=True)


def latency(encoders: dict[str, MiniLMEmbedder], repeats: int = 50) -> dict:
    out = {}
    for chars in (200, 800, 2000):
        text = " ".join(WORDS * 200)[:chars]
        for name, encoder in encoders.items():
            encoder.embed(text)
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                encoder.embed(text)
                times.append(time.perf_counter() - started)
            out[f"{name}_{chars}_chars"] = {"p50_ms": round(1000 * float(np.percentile(times, 50)), 2),
                                            "p99_ms": round(1000 * float(np.percentile(times, 99)), 2)}
    return out


def fidelity(encoders: dict[str, MiniLMEmbedder]) -> float:
    texts = ["how would I " + " ".join(WORDS[i:] + WORDS[:i]) for i in range(12)]
    a, b = (np.stack([encoders[n].embed(t) for t in texts]) for n in ("fp32", "int8"))
    return round(float((a * b).sum(1).min()), 4)


def simulate(rows: list[dict], encoder: MiniLMEmbedder, seed: int = 3) -> dict:
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    texts, numeric = extract_many(rows)
    probs = ComplexityClassifier.load(None).probabilities(texts, numeric)
    vectors = np.stack([encoder.embed(t) for t in texts]).astype(np.float32)
    known = np.stack([known_levels({int(k): v for k, v in r["outcomes"].items()}) for r in rows])
    weak = np.array([r["outcomes"]["1"] for r in rows], float)
    strong = np.array([r["outcomes"]["4"] for r in rows], float)
    variants = {"static_vector": (numeric, DIMS),
                "minilm_in_its_place": (np.hstack([numeric[:, :-DIMS], vectors]), MINILM_DIMS),
                "both_neighbours_by_minilm": (np.hstack([numeric, vectors]), MINILM_DIMS)}
    out = {"rows": len(rows)}
    for name, (x, dims) in variants.items():
        out[name] = {}
        for frac in FRACTIONS:
            cut = int(len(rows) * frac)
            need = fit(x[:cut], probs[:cut], known[:cut], dims).assess(x[cut:], probs[cut:], dims).need
            m = curve_metrics(need[:, 0], weak[cut:], strong[cut:], np.random.default_rng(seed))
            out[name][f"{int(frac * 100)}%"] = {"apgr": round(m["apgr"], 4), "savings_at_95pct": m["save95"]}
    return out


def main() -> int:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        int8 = Path(tmp) / "minilm-int8.onnx"
        quantize_dynamic(str(export_onnx()), str(int8), weight_type=QuantType.QInt8)
        encoders = {"fp32": MiniLMEmbedder(), "int8": MiniLMEmbedder(int8)}
        log("latency")
        result = {"benchmark": "classifier_encoder", "latency": latency(encoders),
                  "int8_min_cosine_to_fp32": fidelity(encoders)}
        log("outcome simulation: synthetic stress set")
        result["synthetic_stress"] = simulate(synthetic_stress_set(), encoders["fp32"])
        log("outcome simulation: real answers (answered once, then cached)")
        result["real_answers"] = simulate(real_outcomes()[0], encoders["fp32"])
    print(json.dumps(result, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
