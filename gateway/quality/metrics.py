"""Prometheus metrics of the quality monitor (labels bounded: tier names, result, check, level)."""
from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

SAMPLES = Counter("tiergate_quality_samples_total",
                  "Quality samples by result: sampled (enqueued), dropped (queue full), passed, failed, error",
                  ["tier", "result"])
CHECK_FAILURES = Counter("tiergate_quality_check_failures_total", "Samples failing a cheap check",
                         ["tier", "check"])
SIMILARITY = Histogram("tiergate_quality_similarity", "Similarity of a tier's answer to the top tier's",
                       ["tier"], buckets=(0.3, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 1.0))
FAILURE_RATE = Gauge("tiergate_quality_failure_rate", "Rolling failure rate of a tier's samples (shared window)",
                     ["tier"], multiprocess_mode="mostrecent")
STEP = Gauge("tiergate_quality_adjustment_steps", "Current routing adjustment away from a tier, in steps",
             ["tier"], multiprocess_mode="max")
THRESHOLD = Gauge("tiergate_classifier_threshold", "Effective classifier threshold on P(level >= k) after the "
                  "quality adjustment", ["level"], multiprocess_mode="mostrecent")
CHANGES = Counter("tiergate_quality_threshold_changes_total", "Adjustments made by this replica",
                  ["tier", "direction"])
QUEUE_DEPTH = Gauge("tiergate_quality_queue_depth", "Samples waiting to be re-asked", multiprocess_mode="sum")
SWAPS = Counter("tiergate_classifier_swaps_total", "Classifier model hot-swaps", ["result"])
ROUTER_OUTCOMES = Counter("tiergate_router_outcomes_total", "Outcomes recorded for the routing models, by source "
                          "(monitor verdicts, uploaded files)", ["source"])
ROUTER_CANDIDATES = Counter("tiergate_router_candidates_total", "Outcome-model candidates the guard judged: swapped "
                            "in or refused", ["result"])
