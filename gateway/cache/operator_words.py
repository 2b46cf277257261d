"""Arithmetic written in words, rewritten to the symbols the guard already compares: "17 plus 5",
"add 17 and 5" and "the sum of 17 and 5" are all "17 + 5". Operands keep their order ("subtract
3 from 5" is "5 − 3", never "3 − 5"). Only between numbers: "plus" elsewhere is not arithmetic,
and a prefix form followed by another operator ("add 2 and 3 times 4") is left as written,
since where its scope ends is not clear."""
from __future__ import annotations

import re

_N = r"(\d+(?:[.,]\d+)*)"
# the minus sign, not "-": a hyphen or dash between words frames, one between numbers computes
_INFIX = {"plus": "+", "minus": "−", "-": "−", "times": "×", "multiplied by": "×", "divided by": "/"}
# an operand that another operator or operand follows: the prefix form's scope is unclear
_MORE = r"(?!\s*(?:[-−+*/×÷^%=]|plus\b|minus\b|times\b|multiplied\b|divided\b|and\b|,\s*\d|\d))"
_PREFIX = (  # (word that must be in the text, pattern, replacement: the operands in the operator's order)
    ("add", rf"\b(?:add|adding)\s+{_N}\s+(?:and|to)\s+{_N}{_MORE}", r"\1 + \2"),
    ("sum", rf"\bsum\s+of\s+{_N}\s+and\s+{_N}{_MORE}", r"\1 + \2"),
    ("subtract", rf"\b(?:subtract|subtracting)\s+{_N}\s+from\s+{_N}{_MORE}", r"\2 − \1"),
    ("product", rf"\bproduct\s+of\s+{_N}\s+and\s+{_N}{_MORE}", r"\1 × \2"),
    ("multiply", rf"\b(?:multiply|multiplying)\s+{_N}\s+by\s+{_N}{_MORE}", r"\1 × \2"),
    ("divid", rf"\b(?:divide|dividing)\s+{_N}\s+by\s+{_N}{_MORE}", r"\1 / \2"),
)
_PREFIX_RE = tuple((word, re.compile(p, re.IGNORECASE), r) for word, p, r in _PREFIX)
_INFIX_RE = re.compile(r"(\d)(\s+(?:plus|minus|times|multiplied\s+by|divided\s+by)\s+|\s*-\s*)(?=\d)", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
_SYMBOLS = str.maketrans({"*": "×", "÷": "/"})


def _infix(match: re.Match) -> str:
    return f"{match.group(1)} {_INFIX[' '.join(match.group(2).lower().split())]} "


def spelled_arithmetic_to_symbols(text: str) -> str:
    if not _DIGIT.search(text):  # no operands: nothing to rewrite (most prose), and the scan is skipped
        return text
    lower = text.lower()
    for word, pattern, replacement in _PREFIX_RE:
        if word in lower:
            text = pattern.sub(replacement, text)
    text = _INFIX_RE.sub(_infix, text)
    return text.translate(_SYMBOLS) if "*" in text or "÷" in text else text
