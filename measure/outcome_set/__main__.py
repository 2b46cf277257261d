"""`python -m measure.outcome_set answer|build`: answer the generated questions per tier level with our
engine, then merge the answers into outcome lines (benchmarks/data/outcome_set/README.md).

    python -m measure.outcome_set answer --levels 1   # one process per level, side by side
    python -m measure.outcome_set build --out FILE
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from .answering import BATCH, answer_level, answers_path, read_answers
from .generate import SEED, generate
from .levels import LEVELS
from .outcome_lines import outcome_lines, summary

DEFAULT_ANSWERS = Path.home() / ".cache" / "tiergate" / "outcome_set"


def log(message: str) -> None:
    print(f"[outcome-set] {message}", file=sys.stderr, flush=True)


def _levels(args) -> dict:
    levels = {lv: LEVELS[lv] for lv in args.levels}
    for override in args.model or []:  # LEVEL=FOLDER: another model for a level (tests, trials)
        level, _, folder = override.partition("=")
        if int(level) not in levels or not folder:
            raise SystemExit(f"--model {override!r}: want LEVEL=FOLDER for one of the levels {sorted(levels)}")
        levels[int(level)] = dataclasses.replace(levels[int(level)], model=folder, quantization=None)
    return levels


def _items(args) -> list[dict]:
    items = generate(args.seed)
    return items[::max(1, len(items) // args.limit)][:args.limit] if args.limit else items


def answer(args) -> int:
    import torch

    torch.set_num_threads(args.threads)
    items = _items(args)
    for level in _levels(args).values():
        answer_level(level, items, args.answers, log, args.batch)
    return 0


def build(args) -> int:
    items = _items(args)
    answers = {lv: read_answers(answers_path(args.answers, lv)) for lv in args.levels}
    lines = outcome_lines(items, answers)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
                                for line in lines), encoding="utf-8")
    log(f"{len(lines)} of {len(items)} items answered at every level {args.levels}: {args.out}")
    print(json.dumps(summary(lines)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m measure.outcome_set", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("answer", "build"))
    parser.add_argument("--levels", type=int, nargs="+", default=sorted(LEVELS), choices=sorted(LEVELS))
    parser.add_argument("--answers", type=Path, default=DEFAULT_ANSWERS, help="folder of the per-level answer files")
    parser.add_argument("--out", type=Path, help="build: the outcome file to write")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--limit", type=int, default=0, help="only N items, spread over the families (a trial slice)")
    parser.add_argument("--batch", type=int, default=BATCH, help="sequences in flight at once")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: one process per level on a busy 2-core machine ran "
                             "about 50 times faster than two threads each; README)")
    parser.add_argument("--model", action="append", metavar="LEVEL=FOLDER", help="answer a level with another model")
    args = parser.parse_args(argv)
    if args.command == "build" and args.out is None:
        parser.error("build needs --out FILE")
    return answer(args) if args.command == "answer" else build(args)


if __name__ == "__main__":
    sys.exit(main())
