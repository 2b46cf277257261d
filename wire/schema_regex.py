"""JSON Schema regular expressions in RE2, which matches in time linear in the text: a request's
`pattern`s and `patternProperties` keys must compile in RE2 (no backreferences or lookaround),
and answers are checked against them with RE2 rather than Python's backtracking `re`."""
from __future__ import annotations

import functools

import re2
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the client's 400, not a line in our log


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str):
    return re2.compile(pattern, options=_OPTIONS)


def re2_refusal(pattern: str) -> str | None:
    """Why RE2 cannot compile `pattern`, or None when it can."""
    try:
        compiled(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "not a regular expression RE2 accepts"
        return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    return None


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not compiled(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, patterns, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = compiled(pattern)
        for key, value in instance.items():
            if regex.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    patterns = [compiled(p) for p in schema.get("patternProperties", {})]
    extras = [k for k in instance if k not in named and not any(r.search(k) for r in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield ValidationError(f"additional properties are not allowed ({sorted(extras)!r} unexpected)")


# Draft 2020-12 with every keyword that matches a pattern against the answer done in RE2.
RE2Validator = validators.extend(Draft202012Validator, {
    "pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties})
