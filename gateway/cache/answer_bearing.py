"""The semantic cache's guard: the words an answer depends on, in order, over the whole prompt.

A similar vector is not a same question: the router's static vectors are a bag of words over a
prompt's head and tail, so "40 miles to km" and "40 km to miles" are one point, and a fact
changed in the middle of a long prompt moves nothing. Two prompts may share a cached answer
only when this sequence is identical: every number, symbol, negation and word outside the
shipped common-word list (names, places, units, quoted words, rare words), in the order the
prompt states them, role by role (docs/caching.md, The guard)."""
from __future__ import annotations

import hashlib
import re
import unicodedata

from .common_words import COMMON

# a number (digits, decimal or thousands marks), a word (letters, inner apostrophe), or one symbol
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)?|[^\w\s]")
_NEGATIONS = frozenset({"not", "no", "never", "none", "nor", "neither", "cannot", "without", "nothing", "nobody"})
_QUIET_SYMBOLS = frozenset(".,;:!?\"'`()[]{}…-")  # punctuation that frames, not symbols that compute
_CONTRACTIONS = (("n't", " not"), ("'re", " are"), ("'ve", " have"), ("'ll", " will"), ("'m", " am"),
                 ("'d", " would"), ("’", "'"))


def _word(token: str) -> str | None:
    """The token as the guard compares it, or None for one it ignores."""
    if token[0].isdigit():
        return token.replace(",", "")
    if not token[0].isalpha():
        return None if token in _QUIET_SYMBOLS else token
    word = token.lower()
    if word.endswith("'s"):
        word = word[:-2]
    if word in _NEGATIONS:
        return "not"
    return None if word in COMMON else word


def answer_bearing(text: str) -> list[str]:
    """The answer-bearing tokens of a text, in order."""
    text = unicodedata.normalize("NFKC", text)
    for short, long in _CONTRACTIONS:
        text = text.replace(short, long)
    return [w for w in map(_word, _TOKEN.findall(text)) if w is not None]


def fingerprint(turns: list[tuple[str, str]]) -> str:
    """A digest of a conversation's answer-bearing tokens, turn by turn with each turn's role:
    prompts that may share an answer have the same one."""
    seq = []
    for role, text in turns:
        seq.append("\x00" + role)
        seq.extend(answer_bearing(text))
    return hashlib.sha256("\x01".join(seq).encode()).hexdigest()
