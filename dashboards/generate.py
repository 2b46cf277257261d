"""`python -m dashboards.generate [--check]`: write the dashboard JSON.

The JSON files under dashboards/grafana/ are what Grafana imports; this script is how they are
edited (panels are built in cost.py, latency.py, quality.py). --check fails when a file is stale.
The scrape config dashboards/prometheus.yml comes from the stack's config: `python -m launcher.prometheus`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import cost, latency, quality

HERE = Path(__file__).parent
BUILDERS = {"tiergate-cost.json": cost.build, "tiergate-latency.json": latency.build,
            "tiergate-quality.json": quality.build}


def outputs() -> dict[Path, str]:
    return {HERE / "grafana" / name: json.dumps(build(), indent=2) + "\n" for name, build in BUILDERS.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboards.generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only report files that differ")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for path in stale:
        print(("stale: " if args.check else "wrote ") + str(path.relative_to(HERE.parent)))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
