"""The gateway's YAML config, validated into typed objects.

Every error names the file and the field (`tiers[1].price_per_mtok.input: ...`), so a bad
edit is rejected with a message a person can act on, and hot reload keeps the old config.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from wire.capabilities import Capabilities, CapabilityCardError, from_mapping

AUTO = "auto"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what api_key_env may name
# Top-level sections read by other packages (policies/, gateway/quality/); the gateway passes them through.
EXTERNAL_SECTIONS = {"tenants", "policy", "quality"}
# Sections that exist one level down: at the top level they would be ignored, so they are errors.
MISPLACED = {"budgets": "policy.defaults.budgets or tenants.<name>.budgets",
             "rate_limits": "policy.defaults.rate_limits or tenants.<name>.rate_limits",
             "usage_log": "policy.usage_log", "admin": "policy.admin_key_sha256", "policies": "policy",
             "defaults": "policy.defaults", "pinned_routes": "policy.defaults.pinned_routes or tenants.<name>"}


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Price:
    input: float
    output: float


@dataclass(frozen=True)
class WorkerSpec:
    url: str
    # Extra `python -m backends.worker` flags (e.g. ["--quantization", "int4"]) used only when
    # the local stack launches this worker itself; the gateway never reads them.
    launch: tuple[str, ...] = ()
    # The upstream's API key (sent as `Authorization: Bearer`) comes from the environment
    # variable api_key_env names, read at load; the YAML never holds the key itself.
    api_key_env: str | None = None
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Tier:
    name: str
    level: int
    model: str
    price_per_mtok: Price
    workers: tuple[WorkerSpec, ...]
    max_tokens_cap: int | None = None  # upper bound on max_tokens sent to this tier's workers
    task: str = "generate"  # "embed": a tier of the `embeddings:` section, never routed chat to
    # What the tier can do, as stated here; a field left out is learned from the workers'
    # /v1/models card (our own workers state theirs), and what nobody states counts as "cannot".
    capabilities: Capabilities = Capabilities()

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.price_per_mtok.input + completion_tokens * self.price_per_mtok.output) / 1e6


@dataclass(frozen=True)
class RedisConfig:
    url: str | None = None
    key_prefix: str = "tiergate:"
    socket_timeout_s: float = 0.25
    retry_after_s: float = 5.0  # how long affinity stays off after a Redis error


@dataclass(frozen=True)
class Timeouts:
    connect_s: float = 2.0
    read_s: float = 120.0  # longest silence from an upstream: whole answer, or gap between chunks


@dataclass(frozen=True)
class Failover:
    max_attempts: int = 3
    escalate: bool = True


@dataclass(frozen=True)
class Health:
    interval_s: float = 2.0
    timeout_s: float = 1.0


@dataclass(frozen=True)
class Breaker:
    failure_threshold: int = 3
    open_s: float = 5.0


@dataclass(frozen=True)
class Affinity:
    enabled: bool = True
    chunk_chars: int = 256
    max_chunks: int = 16
    ttl_s: int = 600
    load_margin: int = 4  # prefer the affine worker unless it has this many more in flight


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = 1 << 20
    default_max_tokens: int = 256  # sent upstream (and admitted) when a request sets no max_tokens


@dataclass(frozen=True)
class ConsoleSettings:
    log_prompts: bool = False  # keep prompt text of recent requests for the console's routing explorer
    recent: int = 1000         # routing decisions kept for the console's table
    retain_minutes: int = 180  # per-minute rollups kept for the console's charts


@dataclass
class Config:
    tiers: list[Tier]
    aliases: dict[str, str]  # alias -> tier name, or "auto"
    embedding_tiers: list[Tier] = field(default_factory=list)  # /v1/embeddings, chosen by model name only
    redis: RedisConfig = field(default_factory=RedisConfig)
    timeouts: Timeouts = field(default_factory=Timeouts)
    failover: Failover = field(default_factory=Failover)
    health: Health = field(default_factory=Health)
    breaker: Breaker = field(default_factory=Breaker)
    affinity: Affinity = field(default_factory=Affinity)
    limits: Limits = field(default_factory=Limits)
    console: ConsoleSettings = field(default_factory=ConsoleSettings)
    raw: dict = field(default_factory=dict)  # the whole document, for sections owned elsewhere
    source: str = "<config>"

    def tier(self, name: str) -> Tier | None:
        return next((t for t in (*self.tiers, *self.embedding_tiers) if t.name == name), None)

    def next_tier_up(self, tier: Tier) -> Tier | None:
        same_task = self.embedding_tiers if tier.task == "embed" else self.tiers
        higher = [t for t in same_task if t.level > tier.level]
        return min(higher, key=lambda t: t.level) if higher else None

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


class _Fields:
    """Typed accessors over one mapping that name the field in every error."""

    def __init__(self, source: str, path: str, data, allowed: set[str]):
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: {path or 'top level'}: must be a mapping")
        unknown = set(data) - allowed
        if unknown:
            raise ConfigError(f"{source}: {self._name(path, sorted(unknown)[0])}: unknown field")
        self.source, self.path, self.data = source, path, data

    @staticmethod
    def _name(path: str, key: str) -> str:
        return f"{path}.{key}" if path else key

    def fail(self, key: str, why: str):
        raise ConfigError(f"{self.source}: {self._name(self.path, key)}: {why}")

    def get(self, key: str, kind, default, check=None, why: str = ""):
        value = self.data.get(key, default)
        if value is None and default is None:
            return None
        ok_type = isinstance(value, kind) and not (isinstance(value, bool) and kind in (int, float, (int, float)))
        if not ok_type:
            self.fail(key, f"must be of type {getattr(kind, '__name__', 'number')}, got {value!r}")
        if check and not check(value):
            self.fail(key, why)
        return value

    def number(self, key, default, lo=0.0, strict=True):
        value = self.get(key, (int, float), default)
        if value < lo or (strict and value == lo):
            self.fail(key, f"must be {'>' if strict else '>='} {lo}")
        return float(value)

    def integer(self, key, default, lo=1):
        return self.get(key, int, default, lambda v: v >= lo, f"must be an integer >= {lo}")

    def section(self, key: str, allowed: set[str]) -> "_Fields":
        return _Fields(self.source, self._name(self.path, key), self.data.get(key), allowed)


def _url(f: _Fields, key: str) -> str:
    url = f.get(key, str, None)
    if url is None:
        f.fail(key, "is required")
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        # the URL shows up in /health, /v1/route, metrics labels and logs: credentials never go there
        f.fail(key, "must not carry credentials (user:password@); use api_key_env for upstream keys")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        f.fail(key, f"must be an http(s) URL, got {url!r}")
    if parts.query or parts.fragment:
        f.fail(key, f"must be a base URL without query or fragment, got {parts.scheme}://{parts.netloc}{parts.path}…")
    return url.rstrip("/")


def _tier(source: str, index: int, data, section: str = "tiers") -> Tier:
    _no_inline_key(source, f"{section}[{index}]", data)
    f = _Fields(source, f"{section}[{index}]", data, {"name", "level", "model", "price_per_mtok", "workers",
                                                  "max_tokens_cap", "api_key_env", "capabilities"})
    name = f.get("name", str, None, lambda v: bool(v.strip()), "must be a non-empty string")
    if name is None:
        f.fail("name", "is required")
    model = f.get("model", str, None, lambda v: bool(v.strip()), "must be a non-empty string")
    if model is None:
        f.fail("model", "is required")
    level = f.integer("level", None)
    if level is None:
        f.fail("level", "is required")
    prices = f.section("price_per_mtok", {"input", "output"})
    for key in ("input", "output"):
        if key not in prices.data:
            prices.fail(key, "is required")
    price = Price(prices.number("input", None, strict=False), prices.number("output", None, strict=False))
    workers = f.get("workers", list, None, lambda v: len(v) > 0, "must list at least one worker")
    if workers is None:
        f.fail("workers", "is required")
    tier_key_env = _key_env(f, None)
    specs = tuple(_worker(source, f"{section}[{index}].workers[{i}]", w, tier_key_env) for i, w in enumerate(workers))
    return Tier(name=name, level=level, model=model, price_per_mtok=price, workers=specs,
                max_tokens_cap=f.integer("max_tokens_cap", None), capabilities=_capabilities(f))


def _capabilities(f: _Fields) -> Capabilities:
    if f.data.get("capabilities") is None:
        return Capabilities()
    try:
        return from_mapping(f.data["capabilities"], f._name(f.path, "capabilities"))
    except CapabilityCardError as exc:
        raise ConfigError(f"{f.source}: {exc}") from None


def _worker(source: str, path: str, data, tier_key_env: str | None) -> WorkerSpec:
    _no_inline_key(source, path, data)
    f = _Fields(source, path, data, {"url", "launch", "api_key_env", "device"})
    launch = f.get("launch", list, [], lambda v: all(isinstance(a, str) for a in v), "must be a list of strings")
    device = f.get("device", str, None, lambda v: v in ("auto", "cpu", "cuda"), "must be auto, cpu or cuda")
    if device:  # shorthand for launch: ["--device", ...]
        launch = ["--device", device, *launch]
    env = _key_env(f, tier_key_env)  # a worker's own api_key_env overrides its tier's
    return WorkerSpec(_url(f, "url"), tuple(launch), env, _read_key(f, env))


def _no_inline_key(source: str, path: str, data) -> None:
    if isinstance(data, dict) and "api_key" in data:
        raise ConfigError(f"{source}: {path}.api_key: never put a key in the config; put it in an environment "
                          "variable and name that variable with api_key_env")


def _key_env(f: _Fields, inherited: str | None) -> str | None:
    return f.get("api_key_env", str, inherited, lambda v: bool(_ENV_NAME.fullmatch(v)),
                 "must be an environment variable name (letters, digits, _)")


def _read_key(f: _Fields, env: str | None) -> str | None:
    if env is None:
        return None
    key = os.environ.get(env, "").strip()
    if not key:
        f.fail("api_key_env", f"environment variable {env} is not set or empty; it must hold this upstream's API key")
    return key


def _check_one_key_per_url(source: str, tiers: list[Tier]) -> None:
    """Tiers listing the same URL share one Backend, so they must name the same key."""
    seen: dict[str, str | None] = {}
    for i, tier in enumerate(tiers):
        for j, spec in enumerate(tier.workers):
            if seen.setdefault(spec.url, spec.api_key_env) != spec.api_key_env:
                raise ConfigError(f"{source}: tiers[{i}].workers[{j}].api_key_env: {spec.url} is listed elsewhere "
                                  f"with api_key_env {seen[spec.url]!r}; one upstream URL has one key")


def parse_config(doc, source: str = "<config>") -> Config:
    for key in MISPLACED:
        if isinstance(doc, dict) and key in doc:
            raise ConfigError(f"{source}: {key}: not a top-level section; it belongs under {MISPLACED[key]}")
    top = _Fields(source, "", doc, {"tiers", "embeddings", "aliases", "redis", "timeouts", "failover", "health",
                                    "breaker", "affinity", "limits", "console"} | EXTERNAL_SECTIONS)
    tiers_raw = top.get("tiers", list, None, lambda v: len(v) > 0, "must list at least one tier")
    if tiers_raw is None:
        top.fail("tiers", "is required")
    tiers = [_tier(source, i, t) for i, t in enumerate(tiers_raw)]
    embedding_tiers = [replace(_tier(source, i, t, "embeddings"), task="embed")
                       for i, t in enumerate(top.get("embeddings", list, []) or [])]
    seen: set[str] = set()
    for section, group in (("tiers", tiers), ("embeddings", embedding_tiers)):
        for i, tier in enumerate(group):
            if tier.name in seen or tier.name == AUTO:
                raise ConfigError(f"{source}: {section}[{i}].name: {tier.name!r} is reserved or used twice")
            seen.add(tier.name)
    _check_one_key_per_url(source, tiers + embedding_tiers)

    aliases = top.get("aliases", dict, {}) or {}
    for alias, target in aliases.items():
        if not isinstance(alias, str) or not isinstance(target, str) or (target != AUTO and target not in seen):
            raise ConfigError(f"{source}: aliases.{alias}: must map to 'auto' or a tier name, got {target!r}")
        if alias in seen or alias == AUTO:
            raise ConfigError(f"{source}: aliases.{alias}: shadows a tier name or 'auto'")

    r = top.section("redis", {"url", "key_prefix", "socket_timeout_s", "retry_after_s"})
    redis = RedisConfig(url=r.get("url", str, None), key_prefix=r.get("key_prefix", str, "tiergate:"),
                        socket_timeout_s=r.number("socket_timeout_s", 0.25),
                        retry_after_s=r.number("retry_after_s", 5.0))
    t = top.section("timeouts", {"connect_s", "read_s"})
    fo = top.section("failover", {"max_attempts", "escalate"})
    h = top.section("health", {"interval_s", "timeout_s"})
    b = top.section("breaker", {"failure_threshold", "open_s"})
    a = top.section("affinity", {"enabled", "chunk_chars", "max_chunks", "ttl_s", "load_margin"})
    lim = top.section("limits", {"max_body_bytes", "default_max_tokens"})
    con = top.section("console", {"log_prompts", "recent", "retain_minutes"})
    return Config(
        tiers=tiers, aliases=dict(aliases), embedding_tiers=embedding_tiers, redis=redis,
        timeouts=Timeouts(t.number("connect_s", 2.0), t.number("read_s", 120.0)),
        failover=Failover(fo.integer("max_attempts", 3), fo.get("escalate", bool, True)),
        health=Health(h.number("interval_s", 2.0), h.number("timeout_s", 1.0)),
        breaker=Breaker(b.integer("failure_threshold", 3), b.number("open_s", 5.0)),
        affinity=Affinity(a.get("enabled", bool, True), a.integer("chunk_chars", 256, lo=16),
                          a.integer("max_chunks", 16), a.integer("ttl_s", 600), a.integer("load_margin", 4, lo=0)),
        limits=Limits(lim.integer("max_body_bytes", 1 << 20, lo=1024), lim.integer("default_max_tokens", 256)),
        console=ConsoleSettings(con.get("log_prompts", bool, False), con.integer("recent", 1000, lo=10),
                                con.integer("retain_minutes", 180, lo=10)),
        raw=doc, source=source,
    )


def load_config(path: str | Path) -> Config:
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    return parse_config(doc, str(path))
