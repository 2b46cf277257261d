"""Typed config sections read from YAML: one field validator, one error type, defaults and docs
taken from the dataclasses themselves.

A leaf package (standard library only), so gateway/ and policies/ share it without either
importing the other, and without the web stack (wire/ holds wire formats, not config)."""
from typedconfig.errors import ConfigError
from typedconfig.fields import MISSING, Fields
from typedconfig.sections import parse_section, setting

__all__ = ["ConfigError", "Fields", "MISSING", "parse_section", "setting"]
