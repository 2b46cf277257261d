"""Bounds on a JSON Schema before anything recursive (the meta-schema check, the worker's
grammar compiler) reads it: depth, size, enum and pattern lengths, and patterns RE2 can run
(schema_regex.py), each named in the 400."""
from __future__ import annotations

from .errors import bad_request
from .schema_regex import re2_refusal

MAX_DEPTH = 64           # nested objects and arrays (a schema level is two: the schema and `properties`)
MAX_NODES = 20_000       # objects, arrays and values in one schema
MAX_ENUM_VALUES = 1_000  # per `enum`
MAX_PATTERN_CHARS = 1_000  # per `pattern` (and patternProperties key)


def check_schema_limits(schema, param: str) -> None:
    """A 400 naming `param` and the limit the schema passes, else nothing. Iterative: a schema
    may nest deeper than Python's recursion limit."""
    stack, nodes = [(schema, 1, "")], 0
    while stack:
        value, depth, path = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise _too(param, f"has more than {MAX_NODES} nodes")
        if depth > MAX_DEPTH:
            raise _too(param, f"nests deeper than {MAX_DEPTH} levels (at '{_clip(path)}')")
        if isinstance(value, dict):
            _check_keywords(value, param, path)
            stack.extend((item, depth + 1, f"{path}/{key}") for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, depth + 1, f"{path}/{i}") for i, item in enumerate(value))


def _check_keywords(node: dict, param: str, path: str) -> None:
    enum = node.get("enum")
    if isinstance(enum, list) and len(enum) > MAX_ENUM_VALUES:
        raise _too(param, f"has an enum of {len(enum)} values at '{_clip(path)}/enum' (at most {MAX_ENUM_VALUES})")
    pattern = node.get("pattern")
    if isinstance(pattern, str) and len(pattern) > MAX_PATTERN_CHARS:
        raise _too(param, f"has a pattern of {len(pattern)} characters at '{_clip(path)}/pattern' "
                          f"(at most {MAX_PATTERN_CHARS})")
    patterns = node.get("patternProperties")
    if isinstance(patterns, dict) and any(len(p) > MAX_PATTERN_CHARS for p in patterns):
        raise _too(param, f"has a patternProperties key longer than {MAX_PATTERN_CHARS} characters "
                          f"at '{_clip(path)}/patternProperties'")
    if isinstance(pattern, str):
        _check_re2(pattern, param, f"{path}/pattern")
    for key in patterns if isinstance(patterns, dict) else ():
        _check_re2(key, param, f"{path}/patternProperties")


def _check_re2(pattern: str, param: str, where: str) -> None:
    """Answers are matched in RE2 (linear time), so a pattern it cannot compile is refused here."""
    reason = re2_refusal(pattern)
    if reason is not None:
        raise bad_request(f"'{param}' has a pattern {pattern!r} at '{_clip(where)}' that RE2 cannot run "
                          f"({reason}): patterns may not use backreferences or lookaround",
                          param=param, code="unsupported_pattern")


def _clip(path: str) -> str:
    return path if len(path) <= 80 else "..." + path[-80:]


def _too(param: str, what: str):
    return bad_request(f"'{param}' {what}", param=param, code="schema_too_complex")
