"""The worker's tracing flags, both ways: read by `python -m backends.worker`, written by the
launcher from the gateway config's `tracing:` section, so every setting reaches the workers it
starts (one definition, no flag the launcher forgets)."""
from __future__ import annotations

import argparse
from dataclasses import fields

from webwire.tracing import Exporting

WORKER_SERVICE_NAME = "tiergate-worker"
# Exporting field -> (flag, type, help); `endpoint` is the switch: without it tracing is off.
FLAGS = {
    "endpoint": ("--otlp-endpoint", str, "export OpenTelemetry spans to this OTLP/HTTP base URL "
                                         "(e.g. http://127.0.0.1:4318); unset: tracing is off"),
    "service_name": ("--trace-service-name", str, "service.name of this worker's spans"),
    "sample_ratio": ("--trace-sample-ratio", float, "share of new traces recorded (a sampled "
                                                    "traceparent from the gateway is always followed)"),
    "export_timeout_s": ("--trace-export-timeout-s", float, "longest wait for one export"),
    "export_interval_s": ("--trace-export-interval-s", float, "spans are exported at least this often"),
    "max_queued_spans": ("--trace-max-queued-spans", int, "spans held for export; past it new ones are dropped"),
}
DEFAULTS = {f.name: f.default for f in fields(Exporting) if f.name in FLAGS}
DEFAULTS.update(endpoint=None, service_name=WORKER_SERVICE_NAME)


def add_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("tracing (OpenTelemetry, docs/tracing.md)")
    for name, (flag, kind, text) in FLAGS.items():
        group.add_argument(flag, dest=f"trace_{name}", type=kind, default=DEFAULTS[name],
                           help=f"{text} (default: {DEFAULTS[name]})")


def from_args(args: argparse.Namespace) -> Exporting | None:
    """The worker's Exporting, or None when no endpoint was given (tracing off)."""
    values = {name: getattr(args, f"trace_{name}") for name in FLAGS}
    return Exporting(**values) if values["endpoint"] else None


def as_flags(exporting: Exporting | None) -> list[str]:
    """The command-line flags that give a worker `exporting`; none when it is None."""
    if exporting is None:
        return []
    return [part for name, (flag, _, _) in FLAGS.items() for part in (flag, str(getattr(exporting, name)))]
