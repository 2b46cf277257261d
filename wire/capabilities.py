"""What a request needs from a tier, and what a tier can do.

Pure: imported by the gateway (routing) and by policies (the decision), never the web stack.

A tier's capabilities come from its workers' `GET /v1/models` card (field `capabilities`)
or from the config; a capability nobody stated is unknown, and unknown means *not capable*:
a request is never sent where its `tools` or `response_format` would be ignored silently.
An unknown `max_context_tokens` is the exception: the window is then not checked here and
the worker itself refuses a prompt that is too long.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

# The boolean capabilities, and the request parameter that asks for each (named in 400s).
FEATURES = ("tools", "structured_outputs", "logprobs", "n", "embeddings")
CONTEXT = "max_context_tokens"
VOCAB = "vocab_size"  # token ids the model reads: the bound on logit_bias, stop_token_ids, prompt ids
SIZES = (CONTEXT, VOCAB)


@dataclass(frozen=True)
class Capabilities:
    """None = not stated (so: not capable; for the context window: not checked)."""
    tools: bool | None = None
    structured_outputs: bool | None = None  # response_format json_object and json_schema
    logprobs: bool | None = None
    n: bool | None = None
    embeddings: bool | None = None
    max_context_tokens: int | None = None
    vocab_size: int | None = None

    def over(self, learned: "Capabilities") -> "Capabilities":
        """These values where stated, `learned` ones elsewhere (the config wins over the worker)."""
        return Capabilities(**{f.name: learned_or(getattr(self, f.name), getattr(learned, f.name))
                               for f in fields(self)})

    def lacks(self, needs: "Needs") -> list[str]:
        """The needed features this tier lacks, then 'max_context_tokens' if the prompt cannot fit."""
        missing = [f for f in needs.features if getattr(self, f) is not True]
        if self.max_context_tokens is not None and needs.context_tokens > self.max_context_tokens:
            missing.append(CONTEXT)
        return missing

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def learned_or(stated, learned):
    return learned if stated is None else stated


def intersect(cards: list[Capabilities]) -> Capabilities:
    """What every one of these workers can do (a request may land on any of them)."""
    if not cards:
        return Capabilities()
    values: dict[str, Any] = {}
    for name in FEATURES:
        values[name] = True if all(getattr(c, name) is True for c in cards) else None
    for name in SIZES:
        sizes = [getattr(c, name) for c in cards]
        values[name] = None if None in sizes else min(sizes)
    return Capabilities(**values)


class CapabilityCardError(ValueError):
    pass


def from_mapping(data: Any, where: str) -> Capabilities:
    """Validate a `capabilities` mapping (a worker's card or a config section)."""
    if not isinstance(data, Mapping):
        raise CapabilityCardError(f"{where}: must be a mapping")
    unknown = set(data) - set(FEATURES) - set(SIZES)
    if unknown:
        raise CapabilityCardError(f"{where}.{sorted(unknown)[0]}: unknown capability")
    values: dict[str, Any] = {}
    for name in FEATURES:
        value = data.get(name)
        if value is not None and not isinstance(value, bool):
            raise CapabilityCardError(f"{where}.{name}: must be true or false, got {value!r}")
        values[name] = value
    for name in SIZES:
        size = data.get(name)
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise CapabilityCardError(f"{where}.{name}: must be an integer >= 1, got {size!r}")
        values[name] = size
    return Capabilities(**values)


def from_models_card(card: Any) -> Capabilities:
    """A worker's `GET /v1/models` answer -> what it says it can do (nothing, if it says nothing)."""
    data = card.get("data") if isinstance(card, Mapping) else None
    entry = data[0] if isinstance(data, list) and data and isinstance(data[0], Mapping) else {}
    stated = entry.get("capabilities")
    if not isinstance(stated, Mapping):
        return Capabilities()
    try:  # a worker may state more than routing reads (e.g. dimensions): only ours are checked
        return from_mapping({k: v for k, v in stated.items() if k in FEATURES or k in SIZES}, "capabilities")
    except CapabilityCardError:
        return Capabilities()  # a card we cannot read states nothing we may rely on


@dataclass(frozen=True)
class Needs:
    features: tuple[str, ...] = ()      # in FEATURES order
    params: tuple[str, ...] = ()        # the request parameter behind each feature
    context_tokens: int = 0             # estimated prompt tokens + max_tokens
    prompt_param: str = "messages"

    def param_for(self, missing: str) -> str:
        if missing == CONTEXT:
            return self.prompt_param
        return self.params[self.features.index(missing)]


def _asks_tools(body: Mapping) -> bool:
    return bool(body.get("tools")) and body.get("tool_choice") != "none"


def _asks_structure(body: Mapping) -> bool:
    fmt = body.get("response_format")
    return isinstance(fmt, Mapping) and fmt.get("type") in ("json_object", "json_schema")


def _asks_logprobs(body: Mapping) -> str | None:
    if body.get("top_logprobs"):
        return "top_logprobs"
    value = body.get("logprobs")
    # chat: logprobs true; completions: logprobs is an integer count (0 still asks for the sampled token's)
    return "logprobs" if value is True or (isinstance(value, int) and not isinstance(value, bool)) else None


def _asks_n(body: Mapping) -> bool:
    n = body.get("n")
    return isinstance(n, int) and not isinstance(n, bool) and n > 1


_ASKING = frozenset(("tools", "response_format", "logprobs", "top_logprobs", "n"))


def needs_of(body: Mapping, prompt_tokens: int, max_tokens: int) -> Needs:
    """The capabilities a generation request needs, and the context it fills: its prompt and the
    `max_tokens` it may generate (the gateway's one rule decides that number)."""
    out = max_tokens
    prompt_param = "messages" if "messages" in body else "prompt"
    if _ASKING.isdisjoint(body.keys()):  # most requests: nothing to look at (this runs per request)
        return Needs((), (), prompt_tokens + out, prompt_param)
    asked: list[tuple[str, str]] = []
    if _asks_tools(body):
        asked.append(("tools", "tools"))
    if _asks_structure(body):
        asked.append(("structured_outputs", "response_format"))
    logprobs = _asks_logprobs(body)
    if logprobs:
        asked.append(("logprobs", logprobs))
    if _asks_n(body):
        asked.append(("n", "n"))
    return Needs(tuple(f for f, _ in asked), tuple(p for _, p in asked), prompt_tokens + out, prompt_param)


EMBEDDINGS = Needs(("embeddings",), ("model",), 0, "input")
