"""Default sampling settings from the model's generation config, as vLLM does.

A request that leaves a setting unset gets the model's own default (its
generation_config.json) where the model has one, else the OpenAI default. The worker
shows them in `/v1/models` as `generation_defaults`.
"""
from __future__ import annotations

import json
from pathlib import Path

# generation_config.json key -> our parameter name
_KEYS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
         "repetition_penalty": "repetition_penalty", "max_new_tokens": "max_tokens"}
OPENAI_DEFAULTS = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "repetition_penalty": 1.0}


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
