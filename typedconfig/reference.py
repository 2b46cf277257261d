"""Markdown tables of config fields, read from the same dataclasses the parser uses."""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Iterator

from typedconfig.fields import MISSING
from typedconfig.sections import config_fields, default_of, optional_inner, yaml_key


def type_name(hint: Any) -> str:
    inner, optional = optional_inner(hint)
    origin, args = typing.get_origin(inner), typing.get_args(inner)
    if origin is tuple or origin is list:
        name = f"list of {type_name(args[0])}"
    elif origin is dict:
        name = f"mapping of {type_name(args[0])} to {type_name(args[1])}"
    elif dataclasses.is_dataclass(inner):
        name = "mapping"
    else:
        name = getattr(inner, "__name__", str(inner))
    return f"{name} or null" if optional else name


def default_text(value: Any) -> str:
    if value is MISSING:
        return "required"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (tuple, list)):
        return "[]" if not value else "[" + ", ".join(map(str, value)) + "]"
    if dataclasses.is_dataclass(value) or (isinstance(value, dict) and not value):
        return "{}"  # a section of defaults
    return f'"{value}"' if isinstance(value, str) else str(value)


def _limits(rules: dict) -> str:
    parts = [f">= {rules['minimum']}" if "minimum" in rules else "", f"> {rules['above']}" if "above" in rules else "",
             f"<= {rules['maximum']}" if "maximum" in rules else "",
             " \\| ".join(rules["choices"]) if "choices" in rules else ""]
    return ", ".join(p for p in parts if p)


def rows(cls: type, prefix: str) -> Iterator[tuple[str, str, str, str]]:
    """(YAML path, type, default, meaning) for every field of `cls`, nested sections and list
    entries included (`tiers[].workers[].url`)."""
    for field, hint in config_fields(cls):
        meta = field.metadata
        path = prefix + yaml_key(field)
        kind = meta.get("shown_as") or type_name(hint)
        limits = _limits(meta.get("rules") or {})
        if limits:
            kind = f"{kind} ({limits})"
        default = default_of(field)
        inner, _ = optional_inner(hint)
        nested = dataclasses.is_dataclass(inner) and not meta.get("shown_as")  # a section of its own fields
        yield path, kind, default_text(default), meta.get("doc", "")
        if nested:
            yield from rows(inner, path + ".")
        if meta.get("items"):
            yield from rows(meta["items"], path + "[].")


def table(cls: type, prefix: str = "") -> str:
    lines = ["| Field | Type | Default | Meaning |", "|---|---|---|---|"]
    lines += [f"| `{path}` | {kind} | {default} | {doc.replace('|', chr(92) + '|')} |"
              for path, kind, default, doc in rows(cls, prefix)]
    return "\n".join(lines) + "\n"
