"""Typed reads from one YAML mapping; every error names `file: field.path`."""
from __future__ import annotations

from typing import Any, NoReturn

from typedconfig.errors import ConfigError

MISSING: Any = object()  # "no default": the field is required


class Fields:
    """One mapping being read. Keys nobody read are rejected by `finish`, so a typo in a limit
    is an error instead of silently meaning "no limit"."""

    def __init__(self, raw: Any, path: str, source: str):
        self.path, self.source = path, source
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError.at(source, path, f"must be a mapping, got {type(raw).__name__}")
        self.raw = raw
        self._read: set = set()

    def at(self, name: Any) -> str:
        """The full path of a field of this mapping (or of the mapping itself for None)."""
        if name is None:
            return self.path
        return f"{self.path}.{name}" if self.path else str(name)

    def error(self, name: Any, why: str) -> ConfigError:
        return ConfigError.at(self.source, self.at(name), why)

    def fail(self, name: Any, why: str) -> NoReturn:
        raise self.error(name, why)

    def get(self, name: str, default: Any = MISSING) -> Any:
        self._read.add(name)
        if name not in self.raw or self.raw[name] is None:
            if default is MISSING:
                self.fail(name, "is required")
            return default
        return self.raw[name]

    def child(self, name: str) -> "Fields":
        return Fields(self.get(name, {}), self.at(name), self.source)

    def boolean(self, name: str, default: Any = MISSING) -> Any:
        value = self.get(name, default)
        if value is not default and not isinstance(value, bool):
            self.fail(name, f"must be true or false, got {value!r}")
        return value

    def integer(self, name: str, default: Any = MISSING, minimum: float | None = None,
                maximum: float | None = None) -> Any:
        value = self.get(name, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(name, f"must be an integer, got {value!r}")
        self._check_range(name, value, minimum, maximum)
        return value

    def number(self, name: str, default: Any = MISSING, minimum: float | None = None,
               maximum: float | None = None, above: float | None = None) -> Any:
        value = self.get(name, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(name, f"must be a number, got {value!r}")
        if above is not None and value <= above:
            self.fail(name, f"must be > {above}, got {value!r}")
        self._check_range(name, value, minimum, maximum)
        return value

    def string(self, name: str, default: Any = MISSING, choices: tuple[str, ...] | None = None,
               empty_ok: bool = False) -> Any:
        value = self.get(name, default)
        if value is default:
            return value
        if not isinstance(value, str) or not (value or empty_ok):
            self.fail(name, f"must be a non-empty string, got {value!r}")
        if choices is not None and value not in choices:
            self.fail(name, f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    def string_list(self, name: str, default: Any = MISSING) -> Any:
        value = self.get(name, default)
        if value is default:
            return value
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(name, f"must be a list of strings, got {value!r}")
        return tuple(value)

    def string_map(self, name: str, default: Any = MISSING) -> Any:
        value = self.get(name, default)
        if value is default:
            return dict(value) if isinstance(value, dict) else value
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in value.items()):
            self.fail(name, f"must map names to strings, got {value!r}")
        return dict(value)

    def items(self, name: str, default: Any = MISSING, non_empty: bool = False) -> Any:
        """A list field: [(path of the item, the item), ...]."""
        value = self.get(name, default)
        if value is default:
            return value
        if not isinstance(value, list) or (non_empty and not value):
            self.fail(name, "must list at least one entry" if non_empty else f"must be a list, got {value!r}")
        return [(f"{self.at(name)}[{i}]", item) for i, item in enumerate(value)]

    def finish(self) -> None:
        unknown = sorted(str(k) for k in self.raw if k not in self._read)
        if unknown:
            self.fail(unknown[0], "unknown field")

    def _check_range(self, name: str, value: float, minimum: float | None, maximum: float | None) -> None:
        if minimum is not None and maximum is not None and not minimum <= value <= maximum:
            self.fail(name, f"must be between {minimum} and {maximum}, got {value!r}")
        if minimum is not None and value < minimum:
            self.fail(name, f"must be >= {minimum}, got {value!r}")
        if maximum is not None and value > maximum:
            self.fail(name, f"must be <= {maximum}, got {value!r}")
