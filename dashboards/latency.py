"""Latency dashboard: are users waiting? Gateway view per tier, engine view per worker."""
from __future__ import annotations

from .panels import RATE, dashboard, label_variable, quantile_targets, targets, timeseries

TIER = '{tier=~"$tier"}'
WORKER = '{instance=~"$worker"}'


def _gateway_panels() -> list[dict]:
    return [
        timeseries("Gateway: time to first token per tier", "As the client sees it: arrival at the gateway to "
                   "the first streamed token (whole answers: to the complete body).",
                   quantile_targets("tiergate_ttft_seconds", "tier", TIER), "s", size=(8, 8)),
        timeseries("Gateway: time per output token per tier", "Streamed answers: (last - first token) / "
                   "(completion tokens - 1).",
                   quantile_targets("tiergate_time_per_output_token_seconds", "tier", TIER), "s", size=(8, 8)),
        timeseries("Gateway: end-to-end per tier", "Arrival at the gateway to the last byte of the answer.",
                   quantile_targets("tiergate_request_duration_seconds", "tier", TIER), "s", size=(8, 8)),
        timeseries("Gateway: own overhead p99 per tier", "Time spent in the gateway itself (not waiting on workers).",
                   targets((f"histogram_quantile(0.99, sum by (tier, le) (rate(tiergate_overhead_seconds_bucket{TIER}[{RATE}])))",
                            "p99 {{tier}}")), "s", size=(8, 8)),
        timeseries("Affinity hit rate per tier", "Requests sent to the worker that recently served the same "
                   "prompt prefix, out of those with a prefix to look up.",
                   targets((f'sum by (tier) (rate(tiergate_affinity_total{{tier=~"$tier", result="hit"}}[{RATE}])) / '
                            f"sum by (tier) (rate(tiergate_affinity_total{TIER}[{RATE}]))", "{{tier}}")),
                   "percentunit", size=(8, 8), min=0, max=1),
        timeseries("Upstream errors and retries", "Failed upstream attempts by kind, and attempts retried elsewhere.",
                   targets((f"sum by (tier, kind) (rate(tiergate_upstream_errors_total{TIER}[{RATE}]))",
                            "{{tier}} {{kind}}"),
                           (f"sum by (tier) (rate(tiergate_retries_total{TIER}[{RATE}]))", "{{tier}} retried")),
                   "reqps", size=(8, 8)),
    ]


def _engine_panels() -> list[dict]:
    by = "instance, model"
    return [
        timeseries("Worker: time to first token", "Arrival at the worker to its first token.",
                   quantile_targets("tiergate_worker_time_to_first_token_seconds", by, WORKER), "s", size=(8, 8)),
        timeseries("Worker: inter-token latency", "Gap between consecutive output tokens of one sequence.",
                   quantile_targets("tiergate_worker_inter_token_latency_seconds", by, WORKER), "s", size=(8, 8)),
        timeseries("Worker: end-to-end", "Arrival at the worker to its last token.",
                   quantile_targets("tiergate_worker_e2e_request_latency_seconds", by, WORKER), "s", size=(8, 8)),
        timeseries("Queue depth (waiting requests)", "Requests queued in each engine for admission.",
                   targets((f"sum by (instance) (tiergate_worker_num_requests_waiting{WORKER})", "{{instance}}")),
                   "short", size=(8, 8)),
        timeseries("Running sequences", "Sequences in each engine's running batch.",
                   targets((f"sum by (instance) (tiergate_worker_num_requests_running{WORKER})", "{{instance}}")),
                   "short", size=(8, 8)),
        timeseries("KV-cache usage", "Share of each engine's KV blocks in use.",
                   targets((f"max by (instance) (tiergate_worker_kv_cache_usage_ratio{WORKER})", "{{instance}}")),
                   "percentunit", size=(8, 8), min=0, max=1),
        timeseries("Prefix-cache hit rate", "Prompt tokens served from the prefix cache, out of those looked up.",
                   targets((f"sum by (instance) (rate(tiergate_worker_prefix_cache_hits_total{WORKER}[{RATE}])) / "
                            f"sum by (instance) (rate(tiergate_worker_prefix_cache_queries_total{WORKER}[{RATE}]))",
                            "{{instance}}")), "percentunit", size=(8, 8), min=0, max=1),
        timeseries("Speculative decoding: acceptance", "Draft tokens the target model accepted, out of those "
                   "proposed (left axis), and tokens gained per verification step (accepted + 1).",
                   targets((f"sum by (instance) (rate(tiergate_worker_spec_accepted_tokens_total{WORKER}[{RATE}])) / "
                            f"sum by (instance) (rate(tiergate_worker_spec_draft_tokens_total{WORKER}[{RATE}]))",
                            "{{instance}} acceptance"),
                           (f"(sum by (instance) (rate(tiergate_worker_spec_accepted_tokens_total{WORKER}[{RATE}])) + "
                            f"sum by (instance) (rate(tiergate_worker_spec_steps_total{WORKER}[{RATE}]))) / "
                            f"sum by (instance) (rate(tiergate_worker_spec_steps_total{WORKER}[{RATE}]))",
                            "{{instance}} tokens/step")), "short", size=(8, 8)),
        timeseries("Preemptions", "Sequences preempted for lack of KV blocks (recomputed later).",
                   targets((f"sum by (instance) (rate(tiergate_worker_preemptions_total{WORKER}[{RATE}]))",
                            "{{instance}}")), "ops", size=(8, 8)),
    ]


def build() -> dict:
    variables = [label_variable("tier", "Tier", "tiergate_request_duration_seconds_count", "tier"),
                 label_variable("worker", "Worker", "tiergate_worker_num_requests_running", "instance")]
    return dashboard("tiergate-latency", "Tiergate / Latency",
                     "Time to first token, time per output token and end-to-end latency per tier (gateway) and "
                     "per worker (engine), with the engine state that explains them.",
                     _gateway_panels() + _engine_panels(), variables, time_from="now-3h")
