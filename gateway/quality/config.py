"""The `quality:` section of tiergate.yaml, validated like the rest of the config.

    quality:
      enabled: true                # default: true when this section exists, false without it
      sampling_rate: 0.05          # share of answers from tiers below the top that are re-checked
      queue_size: 256              # pending samples; beyond this they are dropped (and counted)
      concurrency: 2               # background re-asks in flight
      similarity_threshold: 0.85   # below this cosine similarity a sample fails
      reference_max_tokens: 256    # the top-tier re-ask asks for min(client max_tokens, this)
      window: 50                   # rolling window of verdicts per tier / per predicted class
      min_samples: 50              # fresh samples needed before each threshold change (default: window)
      trigger: 0.15                # failure rate above this raises the tier's boundary one step
      recover: 0.08                # failure rate below this relaxes it one step (hysteresis)
      step: 0.1                    # threshold change per step
      max_steps: 3                 # bound on the adjustment per tier
      stream_maxlen: 10000         # capped Redis stream of samples
      store_requests: false        # keep the request messages in the sample (needed by export-feedback)
      store_answers: false         # keep both answers' text in the sample (otherwise hashes + lengths)
      classifier_model_dir: null   # watched folder: a new model there is hot-swapped in
      refresh_s: 1.0               # how often replicas re-read shared state and the model folder

Privacy: with `store_requests` or `store_answers` off (the default) Redis holds only hashes,
lengths and scores. Retraining from feedback needs the request text, so turning
`store_requests` on is the trade: prompts stay in Redis (capped stream) until trimmed.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import Config, ConfigError, _Fields

_KEYS = {"enabled", "sampling_rate", "queue_size", "concurrency", "similarity_threshold", "reference_max_tokens",
         "window", "min_samples", "trigger", "recover", "step", "max_steps", "stream_maxlen", "store_requests",
         "store_answers", "classifier_model_dir", "refresh_s", "max_request_chars"}


@dataclass(frozen=True)
class QualityConfig:
    enabled: bool = True
    sampling_rate: float = 0.05
    queue_size: int = 256
    concurrency: int = 2
    similarity_threshold: float = 0.85
    reference_max_tokens: int = 256
    window: int = 50
    min_samples: int = 50
    trigger: float = 0.15
    recover: float = 0.08
    step: float = 0.1
    max_steps: int = 3
    stream_maxlen: int = 10000
    store_requests: bool = False
    store_answers: bool = False
    classifier_model_dir: str | None = None
    refresh_s: float = 1.0
    max_request_chars: int = 16000  # longer requests are sampled but not stored for retraining


def _share(f: _Fields, key: str, default: float) -> float:
    value = f.number(key, default, strict=False)
    if value > 1.0:
        f.fail(key, "must be between 0 and 1")
    return value


def parse_quality(config: Config) -> QualityConfig:
    f = _Fields(config.source, "quality", config.raw.get("quality"), _KEYS)
    window = f.integer("window", 50, lo=2)
    q = QualityConfig(
        enabled=f.get("enabled", bool, "quality" in config.raw),  # no section: off, old configs unchanged
        sampling_rate=_share(f, "sampling_rate", 0.05),
        queue_size=f.integer("queue_size", 256),
        concurrency=f.integer("concurrency", 2),
        similarity_threshold=_share(f, "similarity_threshold", 0.85),
        reference_max_tokens=f.integer("reference_max_tokens", 256),
        window=window,
        min_samples=f.integer("min_samples", window),
        trigger=_share(f, "trigger", 0.15),
        recover=_share(f, "recover", 0.08),
        step=_share(f, "step", 0.1),
        max_steps=f.integer("max_steps", 3),
        stream_maxlen=f.integer("stream_maxlen", 10000, lo=10),
        store_requests=f.get("store_requests", bool, False),
        store_answers=f.get("store_answers", bool, False),
        classifier_model_dir=f.get("classifier_model_dir", str, None),
        refresh_s=f.number("refresh_s", 1.0),
        max_request_chars=f.integer("max_request_chars", 16000),
    )
    if q.recover >= q.trigger:
        f.fail("recover", f"must be below trigger ({q.trigger}) so the adjustment cannot oscillate")
    if q.min_samples > q.window:
        f.fail("min_samples", f"must be at most window ({q.window})")
    return q


__all__ = ["QualityConfig", "parse_quality", "ConfigError"]
