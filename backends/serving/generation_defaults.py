"""Default sampling settings from the model's generation config, as vLLM does.

A request that leaves a setting unset gets the worker's override (`--override-generation-config`,
as vLLM's flag), else the model's own default (its generation_config.json), else the OpenAI
default. The worker shows them in `/v1/models` as `generation_defaults`.
"""
from __future__ import annotations

import json
from pathlib import Path

# generation_config.json key -> our parameter name
_KEYS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
         "repetition_penalty": "repetition_penalty", "max_new_tokens": "max_tokens"}
OPENAI_DEFAULTS = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "repetition_penalty": 1.0}


# what an override may set, and the values each takes
_RANGES = {"temperature": (float, 0.0, 2.0), "top_p": (float, 1e-9, 1.0), "top_k": (int, 0, 1 << 20),
           "repetition_penalty": (float, 1e-9, 10.0), "max_tokens": (int, 1, 1 << 31)}


def parse_overrides(text: str) -> dict:
    """--override-generation-config's JSON object, checked key by key (ValueError names the key)."""
    try:
        given = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError("not a JSON object") from None
    if not isinstance(given, dict):
        raise ValueError("not a JSON object")
    for key, value in given.items():
        if key not in _RANGES:
            raise ValueError(f"{key!r} cannot be overridden (one of {sorted(_RANGES)})")
        kind, low, high = _RANGES[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                (kind is int and not isinstance(value, int)) or not low <= value <= high:
            what, bounds = ("an integer", (low, high)) if kind is int else ("a number", (f"{low:g}", f"{high:g}"))
            raise ValueError(f"{key!r} must be {what} from {bounds[0]} to {bounds[1]}")
    return given


def read_generation_defaults(model_path: Path | None) -> dict:
    """Only the settings the model's generation config states explicitly."""
    if model_path is None or not (Path(model_path) / "generation_config.json").exists():
        return {}
    config = json.loads((Path(model_path) / "generation_config.json").read_text(encoding="utf-8"))
    return {ours: config[theirs] for theirs, ours in _KEYS.items()
            if isinstance(config.get(theirs), (int, float)) and not isinstance(config.get(theirs), bool)}


def setting(name: str, requested, defaults: dict):
    """The request's value, else the model's default, else OpenAI's."""
    if requested is not None:
        return requested
    return defaults.get(name, OPENAI_DEFAULTS.get(name))
