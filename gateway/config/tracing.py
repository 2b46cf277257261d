"""The `tracing:` section: OpenTelemetry spans over OTLP/HTTP, for the gateway and the local
workers the launcher starts (docs/tracing.md). Off by default; read once at process start."""
from __future__ import annotations

from dataclasses import dataclass

from typedconfig import setting
from webwire.trace_flags import DEFAULTS  # one set of defaults for the section and the worker flags
from webwire.tracing import Exporting

from .tiers import base_url

DEFAULT_OTLP_ENDPOINT = "http://127.0.0.1:4318"  # an OpenTelemetry Collector's OTLP/HTTP port


@dataclass(frozen=True)
class TracingConfig:
    enabled: bool = setting(False, "Export OpenTelemetry spans (gateway and local workers). Off: the SDK is "
                                   "never loaded and requests carry no trace headers upstream.")
    otlp_endpoint: str = setting(DEFAULT_OTLP_ENDPOINT, "OTLP/HTTP base URL of the collector; spans are "
                                                        "POSTed to <url>/v1/traces.",
                                 parse=lambda f, key: base_url(f, key, DEFAULT_OTLP_ENDPOINT))
    service_name: str = setting("tiergate-gateway", "service.name of the gateway's spans.")
    worker_service_name: str = setting(
        DEFAULTS["service_name"], "service.name of the spans of the workers the launcher starts (remote "
                                  "workers: their own flags).")
    sample_ratio: float = setting(
        DEFAULTS["sample_ratio"], "Share of new traces recorded. A client's traceparent decides for its own trace "
                                  "(sampled flag), so one trace is never half recorded.", minimum=0, maximum=1)
    export_timeout_s: float = setting(DEFAULTS["export_timeout_s"], "Longest wait for one export to the collector.",
                                      above=0)
    export_interval_s: float = setting(DEFAULTS["export_interval_s"], "Queued spans are exported at least this often.",
                                       above=0)
    max_queued_spans: int = setting(
        DEFAULTS["max_queued_spans"], "Spans held for export per process; past it new spans are dropped, never "
                                      "buffered without bound.", minimum=1)

    def exporting(self, service_name: str | None = None) -> Exporting | None:
        """The export settings of one process (the gateway's unless a service name is given); None when off."""
        if not self.enabled:
            return None
        return Exporting(self.otlp_endpoint, service_name or self.service_name, self.sample_ratio,
                         self.export_timeout_s, self.export_interval_s, self.max_queued_spans)

    def for_workers(self) -> Exporting | None:
        return self.exporting(self.worker_service_name)
