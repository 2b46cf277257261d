"""The `tiers:` and `embeddings:` sections: what each tier is, costs and where its workers are."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from typedconfig import ConfigError, Fields, parse_section, setting
from typedconfig.fields import MISSING
from wire.capabilities import Capabilities, CapabilityCardError, from_mapping

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what api_key_env may name
_KEY_ENV_DOC = ("Name of an environment variable holding this upstream's API key, sent as "
                "`Authorization: Bearer` (never a client's key, never logged); read at load, and an unset "
                "or empty variable is an error. The key itself never goes in the file.")


def base_url(f: Fields, key: str, default=MISSING) -> str:
    """An http(s) base URL without credentials, query or fragment, its trailing / removed."""
    url = f.string(key, default)
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        # the URL shows up in /health, /v1/route, metrics labels and logs: credentials never go there
        f.fail(key, "must not carry credentials (user:password@); use api_key_env for upstream keys")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        f.fail(key, f"must be an http(s) URL, got {url!r}")
    if parts.query or parts.fragment:
        f.fail(key, f"must be a base URL without query or fragment, got {parts.scheme}://{parts.netloc}{parts.path}…")
    return url.rstrip("/")


def _key_env(f: Fields, key: str, inherited: str | None = None) -> str | None:
    env = f.string(key, inherited)
    if env is not None and not ENV_NAME.fullmatch(env):
        f.fail(key, "must be an environment variable name (letters, digits, _)")
    return env


def _folder(f: Fields, key: str) -> str | None:
    path = f.string(key, None)
    if path is not None and not os.path.isdir(path):
        f.fail(key, f"must be an existing folder holding the tier's tokenizer files, got {path!r}")
    return path


def _capabilities(f: Fields, key: str) -> Capabilities:
    card = f.get(key, None)
    if card is None:
        return Capabilities()
    try:
        return from_mapping(card, f.at(key))
    except CapabilityCardError as exc:
        raise ConfigError(f"{f.source}: {exc}") from None


@dataclass(frozen=True)
class Price:
    input: float = setting(doc="USD per million prompt tokens.", minimum=0)
    output: float = setting(doc="USD per million completion tokens (0 for embeddings).", minimum=0)


@dataclass(frozen=True)
class WorkerSpec:
    url: str = setting(doc="The upstream's base URL (http/https, no credentials, query or fragment). "
                           "Only this file chooses upstreams, never a request.", parse=base_url)
    launch: tuple[str, ...] = setting((), "Extra `python -m backends.worker` flags, used only when the local "
                                          "stack launches this worker itself; the gateway never reads them.")
    api_key_env: str | None = setting(None, _KEY_ENV_DOC + " Overrides the tier's.")
    device: str | None = setting(None, "Where the local stack runs this worker: auto, cpu or cuda; short for "
                                       "launch: [\"--device\", ...].", choices=("auto", "cpu", "cuda"))
    api_key: str | None = setting(None, internal=True, repr=False)  # read from api_key_env at load


@dataclass(frozen=True)
class Tier:
    name: str = setting(doc="The tier's name: a model name clients may send, and the routing label.")
    level: int = setting(doc="Complexity level (1 simple .. 4 expert); a request the classifier puts at "
                             "level L goes to the cheapest tier whose level is >= L.", minimum=1)
    model: str = setting(doc="The model name sent to the workers.")
    price_per_mtok: Price = setting(doc="Prices that drive cost accounting and routing economics.")
    workers: tuple[WorkerSpec, ...] = setting(doc="The tier's upstreams (at least one).", items=WorkerSpec,
                                              shown_as="list")
    max_tokens_cap: int | None = setting(None, "Upper bound on max_tokens sent to this tier's workers.",
                                         minimum=1)
    task: str = setting("generate", internal=True)  # "embed": an `embeddings:` tier, never routed chat to
    capabilities: Capabilities = setting(
        Capabilities(), "What the tier can do (tools, structured outputs, context window, ...). A field left "
                        "out is learned from the workers' /v1/models card; what nobody states counts as "
                        "'cannot'.", parse=_capabilities, shown_as="mapping")
    api_key_env: str | None = setting(None, _KEY_ENV_DOC + " Applies to the tier's workers that set none.",
                                      parse=_key_env)
    tokenizer: str | None = setting(
        None, "A local folder with the tier's model tokenizer (Hugging Face files). It counts the tokens of an "
              "answer that came without usage when the worker cannot say (a foreign upstream); without it "
              "the gateway estimates and the usage log marks the row `estimate`. Loaded offline, on first use.",
        parse=_folder)
    model_version: str | None = setting(
        None, "The operator's label of the model behind this tier (e.g. a provider's snapshot date). The response "
              "cache keys answers on it and on the identity the workers state (our workers: model and weights "
              "digest), so change it when a foreign upstream changes its model under the same name.")


def _no_inline_key(f: Fields) -> None:
    if "api_key" in f.raw:
        f.fail("api_key", "never put a key in the config; put it in an environment variable and name that "
                          "variable with api_key_env")


def _worker(path: str, data, source: str, tier_key_env: str | None) -> WorkerSpec:
    f = Fields(data, path, source)
    _no_inline_key(f)
    # a worker's own api_key_env overrides its tier's
    spec = parse_section(WorkerSpec, f, api_key_env=lambda f, key: _key_env(f, key, tier_key_env))
    launch = ("--device", spec.device, *spec.launch) if spec.device else spec.launch
    return replace(spec, api_key=_read_key(f, spec.api_key_env), launch=launch)


def _read_key(f: Fields, env: str | None) -> str | None:
    if env is None:
        return None
    key = os.environ.get(env, "").strip()
    if not key:
        f.fail("api_key_env", f"environment variable {env} is not set or empty; it must hold this upstream's API key")
    return key


def _workers(f: Fields, key: str) -> tuple[WorkerSpec, ...]:
    tier_key_env = _key_env(f, "api_key_env")
    return tuple(_worker(path, w, f.source, tier_key_env) for path, w in f.items(key, non_empty=True))


def parse_tier(path: str, data, source: str, task: str) -> Tier:
    f = Fields(data, path, source)
    _no_inline_key(f)
    tier = parse_section(Tier, f, workers=_workers)
    for key in ("name", "model"):
        if not getattr(tier, key).strip():
            f.fail(key, "must be a non-empty string")
    return replace(tier, task=task)


def parse_tiers(top: Fields, key: str, task: str, required: bool) -> list[Tier]:
    entries = top.items(key, non_empty=True) if required else top.items(key, [])
    return [parse_tier(path, data, top.source, task) for path, data in entries]


def check_names_and_keys(source: str, sections: dict[str, list[Tier]], reserved: str) -> set[str]:
    """Tier names are unique across sections; tiers listing the same URL share one Backend, so
    they must name the same key. Returns the tier names."""
    names: set[str] = set()
    key_of_url: dict[str, str | None] = {}
    for section, tiers in sections.items():
        for i, tier in enumerate(tiers):
            if tier.name in names or tier.name == reserved:
                raise ConfigError.at(source, f"{section}[{i}].name", f"{tier.name!r} is reserved or used twice")
            names.add(tier.name)
            for j, spec in enumerate(tier.workers):
                if key_of_url.setdefault(spec.url, spec.api_key_env) != spec.api_key_env:
                    raise ConfigError.at(source, f"{section}[{i}].workers[{j}].api_key_env",
                                         f"{spec.url} is listed elsewhere with api_key_env "
                                         f"{key_of_url[spec.url]!r}; one upstream URL has one key")
    return names
