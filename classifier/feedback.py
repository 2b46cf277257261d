"""`python -m classifier export-feedback`: quality samples in Redis -> labelled training rows.

    python -m classifier export-feedback --redis-url redis://127.0.0.1:6379/0 --prefix tiergate: \\
        --out feedback.jsonl
    python -m classifier train --feedback feedback.jsonl --out new-model/

A sample that failed on tier level L becomes a row labelled min(4, L + 1): the request needed
at least one tier more. A passed sample is labelled L (that tier was enough) unless
`--failed-only`. Only samples stored with their request text can be exported: the gateway
keeps it when `quality.store_requests: true` (off by default, for privacy).

With `--format outcomes` each sample becomes an outcome line instead (classifier/outcomes.py):
the request plus `{"outcomes": {"<served level>": passed}}`, for `train --outcomes`.
"""
from __future__ import annotations

import json
from pathlib import Path

from .outcomes import outcome_row

PAGE = 1000


def label_for(sample: dict) -> int | None:
    try:
        level = int(sample["tier_level"])
    except (KeyError, ValueError):
        return None
    return min(4, level + 1) if sample.get("verdict") == "fail" else level


def rows_from_samples(samples, failed_only: bool = False) -> tuple[list[dict], dict]:
    rows, stats = [], {"samples": 0, "failed": 0, "passed": 0, "without_request": 0}
    for sample in samples:
        stats["samples"] += 1
        failed = sample.get("verdict") == "fail"
        stats["failed" if failed else "passed"] += 1
        if failed_only and not failed:
            continue
        label = label_for(sample)
        request = sample.get("request")
        if not request or label is None:
            stats["without_request"] += 1
            continue
        row = json.loads(request)
        row.update(tier=label, source="quality-feedback", request_id=sample.get("request_id"),
                   served_tier=sample.get("tier"), verdict=sample.get("verdict"))
        rows.append(row)
    return rows, stats


def outcome_rows_from_samples(samples) -> tuple[list[dict], dict]:
    rows, stats = [], {"samples": 0, "without_request": 0}
    for sample in samples:
        stats["samples"] += 1
        request, level = sample.get("request"), sample.get("tier_level")
        if not request or level is None or sample.get("verdict") not in ("pass", "fail"):
            stats["without_request"] += 1
            continue
        reference = sample.get("reference_level")
        rows.append(outcome_row(json.loads(request), int(level), sample["verdict"] == "pass",
                                int(reference) if reference else None))
    return rows, stats


def read_samples(redis_url: str, prefix: str):
    """Every stored sample, oldest first, in pages (the stream is capped, so this is bounded)."""
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True, socket_timeout=10)
    try:
        start = "-"
        while True:
            page = client.xrange(prefix + "quality:samples", min=start, count=PAGE)
            yield from (fields for _, fields in page)
            if len(page) < PAGE:
                return
            start = "(" + page[-1][0]
    finally:
        client.close()


def export_feedback(redis_url: str, prefix: str, out: str | Path, failed_only: bool = False,
                    fmt: str = "labels") -> dict:
    samples = read_samples(redis_url, prefix)
    if fmt == "outcomes":
        rows, stats = outcome_rows_from_samples(samples)
        _write(out, rows)
        return {**stats, "rows": len(rows), "out": str(out), "format": fmt}
    rows, stats = rows_from_samples(samples, failed_only)
    _write(out, rows)
    return {**stats, "rows": len(rows), "out": str(out),
            "label_distribution": {str(t): sum(r["tier"] == t for r in rows) for t in (1, 2, 3, 4)}}


def _write(out: str | Path, rows: list[dict]) -> None:
    with open(out, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def cmd_export(args) -> dict:
    return export_feedback(args.redis_url, args.prefix, args.out, args.failed_only, args.format)


def add_parser(sub) -> None:
    p = sub.add_parser("export-feedback", help="quality samples stored in Redis -> labelled JSONL rows")
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    p.add_argument("--prefix", default="tiergate:", help="the gateway's redis.key_prefix")
    p.add_argument("--out", required=True, help="JSONL file to write")
    p.add_argument("--failed-only", action="store_true", help="export only failed samples")
    p.add_argument("--format", choices=("labels", "outcomes"), default="labels",
                   help="labelled rows for --feedback, or outcome lines for train --outcomes")
    p.set_defaults(run=cmd_export)
