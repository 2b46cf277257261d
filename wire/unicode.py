"""Text a tokenizer cannot encode: JSON may spell a lone UTF-16 surrogate (`"\\ud800"`), which
Python decodes into a str that no UTF-8 encoder accepts. Found here, refused as a 400 by path."""
from __future__ import annotations

import re

# A surrogate escape in the raw body: the only way one can reach a decoded str (raw UTF-8
# bytes never decode to surrogates). Matched pairs decode to one code point and are fine.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate_path(raw: bytes, doc) -> str | None:
    """The path of the first string (key or value) holding a lone surrogate, else None."""
    if not _SURROGATE_ESCAPE.search(raw):
        return None
    stack = [("", doc)]  # iterative: the document may nest as deep as the JSON parser allowed
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return path or "body"
        elif isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                where = f"{path}.{key}" if path else str(key)
                if _SURROGATE.search(key):
                    return where.encode("utf-8", "backslashreplace").decode()
                stack.append((where, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value))))
    return None
