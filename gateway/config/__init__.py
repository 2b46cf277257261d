"""The config file: one loader for every section, validated into typed objects.

Each top-level section is read by its owner (tiers here and in `tiers.py`, `quality:` by
`quality/config.py`, `policy:` and `tenants:` by `policies/config.py`) with one field validator
(typedconfig), so every error is one `ConfigError` that names the file and the field
(`tiers[1].price_per_mtok.input: ...`), and hot reload keeps the old config. Defaults are the
dataclass defaults below; `python -m gateway.config.reference` writes config/REFERENCE.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from policies.config import PoliciesConfig, parse_policies
from typedconfig import ConfigError, Fields, parse_section, setting
from typedconfig.sections import reject_moved

from ..batches.config import BatchesConfig
from ..cache.config import CacheConfig, check_shared
from .tiers import Price, Tier, WorkerSpec, check_names_and_keys, parse_tiers
from .redis import RedisConfig, parse_redis
from .tracing import TracingConfig
from ..quality.config import QualityConfig, parse_quality

AUTO = "auto"
# Sections that exist one level down: at the top level they would be ignored, so they are errors.
MISPLACED = {"budgets": "policy.defaults.budgets or tenants.<name>.budgets",
             "rate_limits": "policy.defaults.rate_limits or tenants.<name>.rate_limits",
             "usage_log": "policy.usage_log", "admin": "policy.admin_key_sha256", "policies": "policy",
             "defaults": "policy.defaults", "pinned_routes": "policy.defaults.pinned_routes or tenants.<name>"}

__all__ = ["AUTO", "Config", "ConfigError", "Price", "Tier", "WorkerSpec", "load_config", "parse_config"]


@dataclass(frozen=True)
class Timeouts:
    connect_s: float = setting(2.0, "Longest wait to connect to an upstream.", above=0)
    read_s: float = setting(120.0, "Longest silence from an upstream: the whole answer, or the gap between "
                                   "stream chunks. A whole answer still being generated then is stopped and "
                                   "billed (504 answer_timeout), not retried.", above=0)


@dataclass(frozen=True)
class Failover:
    max_attempts: int = setting(3, "Upstream attempts per request, across workers and tiers; each may be "
                                   "billed, so a hard budget reserves them all.", minimum=1)
    escalate: bool = setting(True, "After the tier's workers fail, try the next tier up that the request's "
                                   "tenant may use and that can serve it (never one outside its policy).")
    retry_budget_percent: float = setting(20.0, "Retries over the last 10 s may be at most this share of the "
                                                "requests over them, plus the reserve below.", minimum=0)
    min_retries_per_s: float = setting(10.0, "Retries a second allowed whatever the traffic (the budget's "
                                             "reserve, so a quiet gateway still fails over).", minimum=0)


@dataclass(frozen=True)
class Health:
    interval_s: float = setting(2.0, "Period of the active GET /health of each worker.", above=0)
    timeout_s: float = setting(1.0, "Longest wait for one health check.", above=0)
    silent_checks: int = setting(2, "Health checks in a row that get no answer within timeout_s, with no "
                                    "request answered by the worker meanwhile, before it is taken out of "
                                    "rotation (a busy worker's /health can be slow). One that answers another "
                                    "status than 200, or refuses the connection, is out at once.", minimum=1)


@dataclass(frozen=True)
class Breaker:
    failure_threshold: int = setting(3, "Consecutive worker faults that open a worker's breaker: connection "
                                        "errors, timeouts, 502/503/504, and other 5xx that another worker "
                                        "did not repeat. A 4xx, or a 5xx every worker gives, is the request's; "
                                        "a full queue (503 'overloaded' or with Retry-After) is backpressure.",
                                     minimum=1)
    open_s: float = setting(5.0, "How long an open breaker stays open before a half-open trial.", above=0)


TENANT_SCOPE, GLOBAL_SCOPE = "tenant", "global"


@dataclass(frozen=True)
class Affinity:
    enabled: bool = setting(True, "Send requests that share a prompt prefix to the worker that has it cached.")
    chunk_chars: int = setting(256, "Prefix chunk length in characters.", minimum=16)
    max_chunks: int = setting(16, "Prefix chunks hashed per request.", minimum=1)
    ttl_s: int = setting(600, "How long a prefix stays attached to a worker.", minimum=1)
    load_margin: int = setting(4, "Prefer the affine worker unless it has this many more requests in flight.",
                               minimum=0)
    scope: str = setting(TENANT_SCOPE, "Who shares prefixes: `tenant` (each tenant's prompts are indexed, and "
                                       "cached on the workers, apart from every other tenant's) or `global` (tenants "
                                       "share both: more cache hits for a common system prompt, but a tenant can "
                                       "then tell from the worker chosen or the time to first token whether another "
                                       "tenant sent a prefix; /v1/route withholds the affinity outcome from tenants).",
                         choices=(TENANT_SCOPE, GLOBAL_SCOPE))
    cache_salt: bool = setting(True, "With scope `tenant`, send each request's workers a `cache_salt` derived from "
                                     "its tenant (ours and vLLM key their prefix caches with it). Turn off only for "
                                     "upstreams that refuse the field; their prefix caches are then shared.")


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = setting(1 << 20, "Largest request body accepted, counted after decompression.",
                                  minimum=1024)
    default_max_tokens: int = setting(256, "max_tokens sent upstream (and admitted) when a request sets none.",
                                      minimum=1)
    header_read_timeout_s: float = setting(10.0, "A connection whose first request's headers have not all "
                                                 "arrived this long after it opened is closed (slowloris). Read "
                                                 "at start.", above=0)
    body_read_timeout_s: float = setting(60.0, "A request body not all received this long after the gateway "
                                               "began reading it is a 408 (a file upload included).", above=0)
    keepalive_timeout_s: float = setting(75.0, "An idle keep-alive connection is closed after this long; it "
                                               "also bounds a later request's late headers. Read at start.",
                                         above=0)


@dataclass(frozen=True)
class ConsoleSettings:
    log_prompts: bool = setting(False, "Keep the prompt text of recent requests for the console's routing "
                                       "explorer (off: it never holds prompt text).")
    recent: int = setting(1000, "Routing decisions kept for the console's table.", minimum=10)
    retain_minutes: int = setting(180, "Per-minute rollups kept for the console's charts.", minimum=10)


@dataclass
class Config:
    tiers: list[Tier] = setting(doc="The chat/completions tiers (at least one), routed by complexity.",
                                items=Tier, shown_as="list")
    aliases: dict[str, str] = setting(
        doc="Model names clients may send besides tier names, model names and 'auto': alias -> 'auto' or a "
            "tier name. A model name served by several tiers means the cheapest of them.", factory=dict)
    embedding_tiers: list[Tier] = setting(
        doc="/v1/embeddings tiers: the same fields as a tier, chosen by model name only (no complexity "
            "routing), failing over only to other embeddings tiers.", factory=list, key="embeddings",
        shown_as="list")
    redis: RedisConfig = setting(doc="The shared Redis.", factory=RedisConfig, parse=parse_redis)
    timeouts: Timeouts = setting(doc="Upstream timeouts.", factory=Timeouts)
    failover: Failover = setting(doc="Retrying other workers, then the next tier up.", factory=Failover)
    health: Health = setting(doc="Active health checks of the workers.", factory=Health)
    breaker: Breaker = setting(doc="Per-worker circuit breaker.", factory=Breaker)
    affinity: Affinity = setting(doc="Prompt-prefix affinity (kept in Redis).", factory=Affinity)
    limits: Limits = setting(doc="Request limits.", factory=Limits)
    console: ConsoleSettings = setting(doc="The console at /console: history kept in Redis, and whether it may "
                                           "hold prompt text.", factory=ConsoleSettings)
    quality: QualityConfig = setting(doc="Quality monitor: re-asks a share of the answers of tiers below the "
                                         "top on the top tier, scores them, and moves traffic off a tier whose "
                                         "failure rate rises. Without this section it is off.",
                                     factory=lambda: QualityConfig(enabled=False), parse=parse_quality)
    batches: BatchesConfig = setting(doc="The OpenAI Batch API (/v1/files, /v1/batches): limits and the pace "
                                         "at which batches drain on spare capacity.", factory=BatchesConfig)
    cache: CacheConfig = setting(doc="The exact response cache (docs/caching.md); each tenant's own settings "
                                     "are its policy's cache: and storage.cache_bytes.", factory=CacheConfig)
    policies: PoliciesConfig = setting(doc="Per-tenant policy defaults and service settings (the tenants "
                                           "themselves are the top-level `tenants:`).", factory=PoliciesConfig,
                                       key="policy")
    tracing: TracingConfig = setting(doc="OpenTelemetry traces over OTLP/HTTP, from the client's traceparent "
                                         "through the gateway to the workers (docs/tracing.md). Read at start: "
                                         "a reload that changes it says so and keeps the running one.",
                                     factory=TracingConfig)
    source: str = setting("<config>", internal=True)  # the file, for error messages

    def tier(self, name: str) -> Tier | None:
        return next((t for t in (*self.tiers, *self.embedding_tiers) if t.name == name), None)

    def tiers_above(self, tier: Tier) -> tuple[Tier, ...]:
        """The tiers of the same task above this one, cheapest first (what failover may climb to)."""
        same_task = self.embedding_tiers if tier.task == "embed" else self.tiers
        return tuple(sorted((t for t in same_task if t.level > tier.level), key=lambda t: t.level))

    def embedding_tier(self, name: str) -> Tier | None:
        """The embeddings tier a name means: its own, an alias of it, or the cheapest serving that model."""
        target = self.aliases.get(name, name)
        by_name = next((t for t in self.embedding_tiers if t.name == target), None)
        if by_name is not None:
            return by_name
        serving = [t for t in self.embedding_tiers if t.model == target]
        return min(serving, key=lambda t: t.level) if serving else None

    def resolve_model(self, name: str) -> str | None:
        """'auto', a tier name, or None for a model this config does not know.

        A model name served by several tiers means the cheapest of them."""
        if name == AUTO:
            return AUTO
        if name in self.aliases:
            return self.aliases[name]
        if self.tier(name):
            return name
        serving = [t for t in self.tiers if t.model == name]
        return min(serving, key=lambda t: t.level).name if serving else None


def _check_aliases(top: Fields, aliases: dict[str, str], names: set[str]) -> None:
    for alias, target in aliases.items():
        if target != AUTO and target not in names:
            top.fail(f"aliases.{alias}", f"must map to 'auto' or a tier name, got {target!r}")
        if alias in names or alias == AUTO:
            top.fail(f"aliases.{alias}", "shadows a tier name or 'auto'")


def parse_config(doc, source: str = "<config>") -> Config:
    top = Fields(doc, "", source)
    reject_moved(top, MISPLACED, "not a top-level section; it belongs under {where}")
    tiers = parse_tiers(top, "tiers", "generate", required=True)
    embedding_tiers = parse_tiers(top, "embeddings", "embed", required=False)
    names = check_names_and_keys(source, {"tiers": tiers, "embeddings": embedding_tiers}, AUTO)
    by_level = [t.name for t in sorted(tiers, key=lambda t: t.level)]
    config = parse_section(
        Config, top, tiers=lambda f, key: tiers, embedding_tiers=lambda f, key: embedding_tiers,
        policies=lambda f, key: parse_policies(f.get(key, None), f.get("tenants", None), by_level, source,
                                               [t.name for t in embedding_tiers]))
    _check_aliases(top, config.aliases, names)
    check_shared(top, config.cache, config.policies.tenants)
    config.source = source
    return config


def load_config(path: str | Path) -> Config:
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    return parse_config(doc, str(path))
