"""The one error type for a bad config file."""
from __future__ import annotations


class ConfigError(ValueError):
    """A config file that cannot be used; the message reads `file: field.path: what is wrong`."""

    @classmethod
    def at(cls, source: str, path: str, why: str) -> "ConfigError":
        return cls(f"{source}: {path or 'top level'}: {why}")
