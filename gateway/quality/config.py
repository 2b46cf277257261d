"""The `quality:` section of the config: the background quality monitor's settings.

Privacy: with `store_requests` or `store_answers` off (the default) Redis holds only hashes,
lengths and scores. Retraining from feedback needs the request text, so turning
`store_requests` on is the trade: prompts stay in Redis (capped stream) until trimmed.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from typedconfig import Fields, parse_section, setting


def _share(default: float, doc: str):
    return setting(default, doc, minimum=0, maximum=1)


@dataclass(frozen=True)
class QualityConfig:
    enabled: bool = setting(True, "Run the monitor (default: on when the `quality:` section exists, off "
                                  "without it).")
    sampling_rate: float = _share(0.05, "Share of answers from tiers below the top that are re-checked.")
    queue_size: int = setting(256, "Pending samples; beyond this they are dropped (and counted).", minimum=1)
    concurrency: int = setting(2, "Background re-asks in flight.", minimum=1)
    similarity_threshold: float = _share(0.85, "Below this cosine similarity a sample fails.")
    reask_beyond_policy: bool = setting(False, "Judge every sampled answer against the top tier, even for tenants "
                                               "whose policy (allowed_tiers, allowed_models, max_tier) does not "
                                               "reach it. Off: a sample is re-asked only of tiers its tenant may "
                                               "use, and is not taken when none is above the tier that answered. "
                                               "Re-asks are the operator's cost either way, never billed to the "
                                               "tenant.")
    reference_max_tokens: int = setting(256, "The top-tier re-ask asks for min(client max_tokens, this).",
                                        minimum=1)
    window: int = setting(50, "Rolling window of verdicts per tier and per predicted class.", minimum=2)
    min_samples: int = setting(50, "Fresh samples needed before each threshold change (unset: the window; at "
                                   "most the window).", minimum=1)
    trigger: float = _share(0.15, "A failure rate above this raises the tier's boundary one step.")
    recover: float = _share(0.08, "A failure rate below this relaxes it one step; below trigger (hysteresis).")
    step: float = _share(0.1, "Threshold change per step.")
    max_steps: int = setting(3, "Bound on the adjustment per tier, in steps.", minimum=1)
    stream_maxlen: int = setting(10000, "Length cap of the Redis stream of samples.", minimum=10)
    store_requests: bool = setting(False, "Keep the request messages in the sample (export-feedback needs "
                                          "them): prompts then stay in Redis until trimmed.")
    store_answers: bool = setting(False, "Keep both answers' text in the sample (otherwise hashes and "
                                         "lengths).")
    classifier_model_dir: str | None = setting(None, "Watched folder: a new classifier model there is "
                                                     "hot-swapped in.")
    refresh_s: float = setting(1.0, "How often replicas re-read shared state and the model folder.", above=0)
    max_request_chars: int = setting(16000, "Longer requests are sampled but not stored for retraining.",
                                     minimum=1)
    learn_from_outcomes: bool = setting(True, "Verdicts and uploaded outcome files train the per-tier outcome "
                                              "models; a candidate serves only if the guard's replay accepts it.")
    learn_across_tenants: bool = setting(False, "With tenants (keys), let the monitor's verdicts of every tenant's "
                                                "answers train the outcome models that all tenants' routing reads: "
                                                "one tenant's traffic then moves the others' routing. Off: with "
                                                "tenants, only outcome files the admin uploads train them (without "
                                                "keys, the verdicts always do).")
    learn_every: int = setting(100, "New learning outcomes per candidate the guard judges.", minimum=1)
    heldout_share: float = _share(0.2, "Share of outcomes held out (by hash) to judge candidates; never learned.")
    min_heldout: int = setting(20, "Held-out outcomes needed before the first candidate is judged.", minimum=1)
    outcome_memory: str = setting("tenant", "Whose remembered outcomes a request's nearest-outcome stage reads: "
                                            "`tenant`, its own tenant's verdicts plus the operator's uploaded "
                                            "outcomes (without ?tenant=); `shared`, every tenant's (one "
                                            "organisation whose tenants are teams). Either way /v1/route shows "
                                            "only the expected gain and the threshold, never a neighbour.",
                                  choices=("tenant", "shared"))
    outcome_rows_per_tenant: int = setting(2048, "Newest outcomes each tenant's nearest-outcome memory keeps.",
                                           minimum=10, maximum=8192)
    outcome_memory_tenants: int = setting(256, "Tenants with a nearest-outcome memory of their own (the most "
                                               "recently judged); with outcome_rows_per_tenant it bounds the "
                                               "memory: at most their product in rows, beside the operator's "
                                               "8,192.", minimum=1, maximum=10000)
    outcomes_maxlen: int = setting(20000, "Length cap of the Redis stream of outcomes (and of what is learned).",
                                   minimum=10)
    cascade_min_verdicts: int = setting(100, "Verdicts on a tenant's cascaded answers needed before its cascade "
                                             "threshold is calibrated; below, its policy's threshold serves.",
                                        minimum=10)
    cascade_calibrate_every: int = setting(20, "New verdicts of a tenant's cascaded answers per candidate threshold "
                                                "the guard judges.", minimum=1)
    cascade_verdicts_kept: int = setting(2000, "Newest verdicts on cascaded answers kept per tenant (and calibrated "
                                               "on).", minimum=10, maximum=100000)


def parse_quality(top: Fields, key: str) -> QualityConfig:
    """The section `key` of the top-level mapping; without it the monitor is off (old configs unchanged)."""
    if key not in top.raw:
        return QualityConfig(enabled=False)
    f = top.child(key)
    q = parse_section(QualityConfig, f)
    if f.raw.get("min_samples") is None:
        q = replace(q, min_samples=q.window)
    if q.recover >= q.trigger:
        f.fail("recover", f"must be below trigger ({q.trigger}) so the adjustment cannot oscillate")
    if q.cascade_min_verdicts > q.cascade_verdicts_kept:
        f.fail("cascade_min_verdicts", f"must be at most cascade_verdicts_kept ({q.cascade_verdicts_kept})")
    if q.min_samples > q.window:
        f.fail("min_samples", f"must be at most window ({q.window})")
    return q
