"""Long chaos and fuzz runs: `python -m benchmarks.chaos [--scale N]`

Runs the same suites as `make test` (tests/chaos and tests/fuzz), N times larger: the chaos tests
multiply their request counts and load durations by TIERGATE_CHAOS_SCALE, and the fuzz tests use
the `tiergate-fuzz-long` Hypothesis profile (N times the examples, randomized instead of the fixed
seed `make test` uses, so every long run explores new inputs). Prints pytest's own output, then
one JSON line: {passed, failed, errors, duration_s, scale}. Exits non-zero when anything failed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from measure.scale import FUZZ_PROFILE_ENV, SCALE_ENV

SUITES = ["tests/chaos", "tests/fuzz"]
ROOT = Path(__file__).parents[1]


def _counts(junit: Path) -> dict:
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    tests, failures, errors, skipped = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    return {"passed": tests - failures - errors - skipped, "failed": failures, "errors": errors, "skipped": skipped}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=5, help="load / example multiplier (default 5)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments, e.g. -k bulk")
    args = parser.parse_args()
    if args.scale < 1:
        parser.error("--scale must be at least 1")
    env = dict(os.environ, **{SCALE_ENV: str(args.scale), FUZZ_PROFILE_ENV: "tiergate-fuzz-long"})
    with tempfile.TemporaryDirectory(prefix="tiergate-chaos-") as tmp:
        junit = Path(tmp) / "junit.xml"
        started = time.monotonic()
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              f"--junitxml={junit}", *SUITES, *args.pytest_args], cwd=ROOT, env=env)
        duration = time.monotonic() - started
        counts = _counts(junit) if junit.exists() else {"passed": 0, "failed": 0, "errors": 1, "skipped": 0}
    print(json.dumps({**counts, "duration_s": round(duration, 1), "scale": args.scale, "pytest_rc": rc}))
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
