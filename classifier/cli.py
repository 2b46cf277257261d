"""`python -m classifier train|evaluate|calibrate|predict|replay|export-feedback` (see --help of each)."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from .dataset import load_splits, read_jsonl
from .runtime import METADATA_FILE, MODEL_FILE, PACKAGED_MODEL_DIR

_T0 = time.perf_counter()


def progress(message: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f}s] {message}", file=sys.stderr, flush=True)


def _rows_for(data: str | None) -> dict[str, list[dict]]:
    if data and Path(data).is_file():
        return {"data": read_jsonl(data)}
    return load_splits(data)


def cmd_train(args) -> dict:
    from .pipeline import train
    return train(args.data, args.out, args.feedback, progress, args.config, args.outcomes)


def cmd_evaluate(args) -> dict:
    from .pipeline import evaluate
    splits = _rows_for(args.data)
    return evaluate(args.model, {k: v for k, v in splits.items() if k != "train"} or splits, args.config)


def cmd_calibrate(args) -> dict:
    from .pipeline import calibrate, calibration_sample
    model = Path(args.model)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        for name in (MODEL_FILE, METADATA_FILE):
            shutil.copy(model / name, Path(args.out) / name)
        model = Path(args.out)
    if args.data and Path(args.data).is_file():
        rows = read_jsonl(args.data, need_label=args.shares is None and args.cost is None)
    else:
        rows = calibration_sample(load_splits(args.data))
    shares = [float(x) for x in args.shares.split(",")] if args.shares else None
    progress(f"calibrating {model} on {len(rows)} rows")
    return calibrate(model, rows, args.config, shares, args.cost, args.quality, args.max_under_routing)


def cmd_predict(args) -> dict:
    from .runtime import ComplexityClassifier
    clf = ComplexityClassifier.load(args.model)
    if args.data:  # one JSON line per request, in input order
        requests = read_jsonl(args.data, need_label=False)
        for p in clf.predict_many(requests):
            print(json.dumps({"tier": p.tier, "scores": [round(x, 6) for x in p.probs], "p_good": _by_level(p.p_good),
                              "need": _by_level(p.need)}))
        return None
    if args.messages:
        requests = [{"messages": json.loads(args.messages)}]
    else:
        requests = [{"prompt": args.prompt if args.prompt is not None else sys.stdin.read()}]
    preds = clf.predict_many(requests)
    return {"version": clf.version,
            "predictions": [{"tier": p.tier, "probs": [round(x, 4) for x in p.probs], "p_good": _by_level(p.p_good)}
                            for p in preds]}


def _by_level(values: list[float]) -> dict[str, float]:
    return {str(level): round(v, 6) for level, v in enumerate(values, start=1)}


def cmd_replay(args) -> dict:
    from .replay import replay_file
    if args.quality_target is not None and not 0 <= args.quality_target <= 1:
        raise ValueError("--quality-target must be from 0 to 1")
    return replay_file(args.outcomes, args.model, args.candidate, args.quality_target, args.config)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m classifier")
    sub = parser.add_subparsers(dest="command", required=True)
    default_model = str(PACKAGED_MODEL_DIR)

    p = sub.add_parser("train", help="fit, export to ONNX, calibrate on unseen-template splits, evaluate")
    p.add_argument("--data", help="folder with train/validation/test/heldout.jsonl, or one JSONL file")
    p.add_argument("--out", default=default_model, help="model folder to write")
    p.add_argument("--feedback", nargs="*", default=[], help="extra labelled JSONL files added to training")
    p.add_argument("--outcomes", action="append", default=[],
                   help="outcome JSONL (request + {\"outcomes\": {level: true|false}}); repeatable")
    p.set_defaults(run=cmd_train)

    p = sub.add_parser("evaluate", help="metrics and routing economics on labelled data")
    p.add_argument("--model", default=default_model)
    p.add_argument("--data", help="folder of splits or one JSONL file")
    p.set_defaults(run=cmd_evaluate)

    p = sub.add_parser("calibrate", help="set decision thresholds on a sample")
    p.add_argument("--model", default=default_model)
    p.add_argument("--data", help="sample JSONL (labels needed only for the quality target)")
    p.add_argument("--out", help="write the recalibrated model here instead of in place")
    p.add_argument("--shares", help="target share per tier, e.g. 0.4,0.3,0.2,0.1")
    p.add_argument("--cost", type=float, help="target mean cost per request in USD")
    p.add_argument("--quality", type=float, default=None,
                   help="cheapest thresholds routing this share at or above its label (default: best macro-F1)")
    p.add_argument("--max-under-routing", type=float, default=0.02,
                   help="most tier >= 3 requests that may go to tier 1 (quality and macro-F1 targets)")
    p.set_defaults(run=cmd_calibrate)

    p = sub.add_parser("predict", help="tier and probabilities for requests")
    p.add_argument("--model", default=default_model)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--prompt")
    group.add_argument("--messages", help="JSON list of {role, content}")
    group.add_argument("--data", help="JSONL of requests: prints one {tier, scores, p_good, need} line per request; "
                       "scores rank requests by their need of a higher tier (P(level >= k) = need[k-1] once "
                       "outcomes are learned)")
    p.set_defaults(run=cmd_predict)

    p = sub.add_parser("replay", help="a router on known outcomes: tier mix, quality, cost, APGR; against a "
                                      "candidate and random")
    p.add_argument("--outcomes", required=True, help="outcome JSONL (train --outcomes' format, export-feedback's)")
    p.add_argument("--model", default=default_model, help="the serving router's model folder")
    p.add_argument("--candidate", help="a candidate model folder to compare")
    p.add_argument("--quality-target", type=float,
                   help="route to the cheapest tier whose P(good enough) exceeds this (default: each model's "
                        "calibrated thresholds)")
    p.set_defaults(run=cmd_replay)

    from .feedback import add_parser as add_export_feedback
    add_export_feedback(sub)  # export-feedback: quality samples in Redis -> training rows

    for p in sub.choices.values():
        p.add_argument("--config", help="tiergate.yaml with tier prices (default: config/tiergate.yaml)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = args.run(args)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if result is not None:
        print(json.dumps(result))
    return 0
