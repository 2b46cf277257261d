"""A config section parsed from its dataclass: field types, defaults and rules are read from the
dataclass itself, so each default is written once, where the field is declared.

    @dataclass(frozen=True)
    class Timeouts:
        connect_s: float = setting(2.0, "Longest wait to connect to an upstream.", above=0)

    parse_section(Timeouts, top.child("timeouts"))
"""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Callable

from typedconfig.fields import MISSING, Fields

# A field read its own way: (the mapping it sits in, its YAML key) -> its value.
FieldParser = Callable[[Fields, str], Any]
_RULES = ("minimum", "maximum", "above", "choices", "empty_ok")


def setting(default: Any = MISSING, doc: str = "", *, factory: Callable[[], Any] | None = None,
            key: str | None = None, parse: FieldParser | None = None, shown_as: str | None = None,
            items: type | None = None, internal: bool = False, repr: bool = True, **rules: Any) -> Any:
    """A dataclass field that is also a documented config field.

    doc: its meaning (config/REFERENCE.md); key: its YAML name when not the field's name;
    parse: a reader for a field no plain type describes; shown_as: its type as the reference
    writes it; items: the dataclass of each entry of a list field; internal: not read from
    YAML; rules: minimum, maximum, above (exclusive), choices, empty_ok."""
    unknown = set(rules) - set(_RULES)
    if unknown:
        raise TypeError(f"unknown rule(s) {sorted(unknown)}")
    metadata = {"doc": doc, "key": key, "parse": parse, "shown_as": shown_as, "items": items,
                "internal": internal, "rules": rules}
    if factory is not None:
        return dataclasses.field(default_factory=factory, repr=repr, metadata=metadata)
    if default is MISSING:  # a required field: the dataclass has no default either
        return dataclasses.field(repr=repr, metadata=metadata)
    return dataclasses.field(default=default, repr=repr, metadata=metadata)


def default_of(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return MISSING


def config_fields(cls: type) -> list[tuple[dataclasses.Field, Any]]:
    """(field, resolved type) for every field of `cls` that the YAML sets."""
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls)
            if f.init and not f.metadata.get("internal")]


def yaml_key(field: dataclasses.Field) -> str:
    return field.metadata.get("key") or field.name


def optional_inner(hint: Any) -> tuple[Any, bool]:
    """(T, True) for `T | None`, (hint, False) otherwise."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
    return hint, False


def reject_moved(f: Fields, moved: dict[str, str], why: str) -> None:
    """A key that lives elsewhere (or was replaced) is an error saying where it belongs;
    `why` is formatted with {where}."""
    for key, where in moved.items():
        if key in f.raw:
            f.fail(key, why.format(where=where))


def parse_section(cls: type, f: Fields, **parsers: FieldParser) -> Any:
    """An instance of the dataclass `cls` from the mapping `f`; unknown keys are errors.

    parsers: readers for fields that need context only the caller has (e.g. the tier names)."""
    values = {}
    for field, hint in config_fields(cls):
        key = yaml_key(field)
        parse = parsers.get(field.name) or field.metadata.get("parse")
        values[field.name] = parse(f, key) if parse else read_typed(f, key, hint, default_of(field),
                                                                     field.metadata.get("rules") or {})
    f.finish()
    return cls(**values)


def read_typed(f: Fields, key: str, hint: Any, default: Any, rules: dict) -> Any:
    inner, _ = optional_inner(hint)
    origin, args = typing.get_origin(inner), typing.get_args(inner)
    if dataclasses.is_dataclass(inner):
        return parse_section(inner, f.child(key))
    if inner is bool:
        return f.boolean(key, default)
    if inner is int:
        return f.integer(key, default, rules.get("minimum"), rules.get("maximum"))
    if inner is float:
        value = f.number(key, default, rules.get("minimum"), rules.get("maximum"), rules.get("above"))
        return None if value is None else float(value)
    if inner is str:
        return f.string(key, default, rules.get("choices"), rules.get("empty_ok", False))
    if origin is tuple and args[:1] == (str,):
        return f.string_list(key, default)
    if origin is dict and args == (str, str):
        return f.string_map(key, default)
    raise TypeError(f"{key}: no reader for {hint!r}; give the field a parse= reader")
