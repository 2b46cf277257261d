"""Quality dashboard: is quality holding on the cheaper tiers, and what did the monitor change?

Metrics come from the quality monitor (gateway/quality/metrics.py): a sample of each tier's
answers is re-asked on the top tier and scored; failures move the classifier threshold.
"""
from __future__ import annotations

from .panels import (RATE, dashboard, heatmap, label_variable, prometheus_annotation, target, targets,
                     timeseries)

TIER = '{tier=~"$tier"}'


def _failure_panels() -> list[dict]:
    judged = 'tiergate_quality_samples_total{tier=~"$tier", result=~"passed|failed"}'
    failed = 'tiergate_quality_samples_total{tier=~"$tier", result="failed"}'
    return [
        timeseries("Sampled failure rate per tier", "Share of judged samples that failed (similarity below "
                   "the threshold or a cheap check failed), and the monitor's rolling window rate.",
                   targets((f"sum by (tier) (rate({failed}[{RATE}])) / sum by (tier) (rate({judged}[{RATE}]))",
                            "{{tier}}"),
                           (f"max by (tier) (tiergate_quality_failure_rate{TIER})", "{{tier}} rolling window")),
                   "percentunit", min=0, max=1),
        timeseries("Samples by result", "Sampled (enqueued), dropped (queue full), passed, failed, error.",
                   targets((f"sum by (tier, result) (rate(tiergate_quality_samples_total{TIER}[{RATE}]))",
                            "{{tier}} {{result}}")), "ops"),
        timeseries("Cheap-check failures", "Samples failing a cheap check (empty, truncated, refusal, ...).",
                   targets((f"sum by (tier, check) (rate(tiergate_quality_check_failures_total{TIER}[{RATE}]))",
                            "{{tier}} {{check}}")), "ops", size=(8, 8)),
        timeseries("Quality queue depth", "Samples waiting to be re-asked on the top tier.",
                   targets(("sum(tiergate_quality_queue_depth)", "waiting")), "short", size=(8, 8)),
        timeseries("Routing adjustment per tier (steps)", "How many steps the monitor currently moves "
                   "borderline requests away from a tier.",
                   targets((f"max by (tier) (tiergate_quality_adjustment_steps{TIER})", "{{tier}}")), "short",
                   size=(8, 8)),
    ]


def _similarity_panels() -> list[dict]:
    bucket = f"tiergate_quality_similarity_bucket{TIER}"
    return [
        heatmap("Similarity distribution (all selected tiers)", "Similarity of sampled answers to the top "
                "tier's answer to the same request, per bucket over time.",
                [target(f"sum by (le) (increase({bucket}[$__interval]))", "{{le}}")], "percentunit"),
        timeseries("Similarity quantiles per tier", "Low quantiles matter: p10 is the worst tenth of answers.",
                   targets(*[(f"histogram_quantile({q}, sum by (tier, le) (rate({bucket}[{RATE}])))", f"{name} {{{{tier}}}}")
                             for name, q in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9))]), "percentunit",
                   min=0, max=1),
    ]


def _classifier_panels() -> list[dict]:
    return [
        timeseries("Classifier tier mix", "Complexity levels the classifier predicted for answered requests.",
                   targets(("sum by (level) (rate(tiergate_classifier_predictions_total[$__rate_interval]))",
                            "level {{level}}")), "short", stack="percent", size=(8, 8)),
        timeseries("Tiers chosen by the classifier", "Tier mix of requests whose tier the classifier decided "
                   "(no explicit model, pin, policy change, escalation or failover).",
                   targets(('sum by (tier) (rate(tiergate_routed_requests_total{reason="classifier"}[$__rate_interval]))',
                            "{{tier}}")), "short", stack="percent", size=(8, 8)),
        timeseries("Classifier threshold per level", "Effective threshold on P(level >= k) after the quality "
                   "adjustment; a step down sends more borderline requests to level k.",
                   targets(("max by (level) (tiergate_classifier_threshold)", "level {{level}}")), "short",
                   size=(8, 8), min=0, max=1),
    ]


def build() -> dict:
    variables = [label_variable("tier", "Tier", "tiergate_quality_samples_total", "tier")]
    changes = prometheus_annotation(
        "Threshold changes", "sum by (tier, direction) (increase(tiergate_quality_threshold_changes_total[1m])) > 0",
        "Quality adjustment: {{tier}} {{direction}}", "The quality monitor moved routing for {{tier}} ({{direction}}).",
        "tier,direction", "orange")
    swaps = prometheus_annotation(
        "Classifier swaps", "sum by (result) (increase(tiergate_classifier_swaps_total[1m])) > 0",
        "Classifier model {{result}}", "A new classifier model was {{result}} (hot swap).", "result", "purple")
    return dashboard("tiergate-quality", "Tiergate / Quality",
                     "Sampled answers of the cheaper tiers compared with the top tier: failure rate, similarity, "
                     "the monitor's threshold changes (annotations) and the classifier's tier mix.",
                     _failure_panels() + _similarity_panels() + _classifier_panels(), variables, [changes, swaps],
                     time_from="now-24h")
