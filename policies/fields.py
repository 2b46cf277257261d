"""Typed reads from a YAML mapping with errors that name the file and the field path."""
from __future__ import annotations

from typing import Any


class PolicyConfigError(ValueError):
    """A bad `tenants:`/`policy:` section; the message starts with `file: field.path:`."""


_MISSING = object()


class Fields:
    """One YAML mapping being read; every error names `source: path.field`; unknown keys are rejected."""

    def __init__(self, raw: Any, path: str, source: str):
        self.path = path
        self.source = source
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise self.error(path, f"must be a mapping, got {type(raw).__name__}")
        self.raw = raw
        self._read: set[str] = set()

    def error(self, field: str, problem: str) -> PolicyConfigError:
        return PolicyConfigError(f"{self.source}: {field}: {problem}")

    def field(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def get(self, name: str, default: Any = _MISSING) -> Any:
        self._read.add(name)
        if name not in self.raw or self.raw[name] is None:
            if default is _MISSING:
                raise self.error(self.field(name), "is required")
            return default
        return self.raw[name]

    def child(self, name: str) -> "Fields":
        return Fields(self.get(name, {}), self.field(name), self.source)

    def integer(self, name: str, default: Any = _MISSING, minimum: int | None = None,
                maximum: int | None = None) -> Any:
        value = self.get(name, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(self.field(name), f"must be an integer, got {value!r}")
        self._check_range(name, value, minimum, maximum)
        return value

    def number(self, name: str, default: Any = _MISSING, minimum: float | None = None,
               maximum: float | None = None) -> Any:
        value = self.get(name, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(self.field(name), f"must be a number, got {value!r}")
        self._check_range(name, value, minimum, maximum)
        return value

    def string(self, name: str, default: Any = _MISSING, choices: tuple[str, ...] | None = None) -> Any:
        value = self.get(name, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str) or not value:
            raise self.error(self.field(name), f"must be a non-empty string, got {value!r}")
        if choices is not None and value not in choices:
            raise self.error(self.field(name), f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    def string_list(self, name: str, default: Any = _MISSING) -> Any:
        value = self.get(name, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(self.field(name), f"must be a list of strings, got {value!r}")
        return tuple(value)

    def finish(self) -> None:
        """Reject keys nobody read: a typo in a limit must not silently mean 'no limit'."""
        unknown = sorted(str(k) for k in self.raw if k not in self._read)
        if unknown:
            raise self.error(self.field(unknown[0]), "unknown field")

    def _check_range(self, name: str, value: float, minimum: float | None, maximum: float | None) -> None:
        if minimum is not None and value < minimum:
            raise self.error(self.field(name), f"must be >= {minimum}, got {value!r}")
        if maximum is not None and value > maximum:
            raise self.error(self.field(name), f"must be <= {maximum}, got {value!r}")


def deep_merge(base: dict, override: dict) -> dict:
    """`override` wins field by field; nested mappings merge, lists and scalars replace."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
