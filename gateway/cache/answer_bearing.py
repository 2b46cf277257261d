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
from .operator_words import spelled_arithmetic_to_symbols

# a number (digits, decimal or thousands marks), a word (letters, inner apostrophe), or one symbol
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)?|[^\w\s]")
_NEGATIONS = frozenset({"not", "no", "never", "none", "nor", "neither", "cannot", "without", "nothing", "nobody"})
_QUIET_SYMBOLS = frozenset(".,;:!?\"'`()[]{}…-")  # punctuation that frames, not symbols that compute
# a word's contracted ending (what's, they're, I'd): what it expands to is common, so only the word is kept
_CLITICS = frozenset({"s", "re", "ve", "ll", "m", "d"})
_NOT_STEMS = {"ca": "can", "wo": "will", "sha": "shall"}  # can't, won't, shan't; the rest drop "n" (don't)


def _words(token: str) -> list[str]:
    """The token as the guard compares it: none for one it ignores, two for a negated contraction."""
    if token[0].isdigit():
        return [token.replace(",", "")]
    if not token[0].isalpha():
        return [] if token in _QUIET_SYMBOLS else [token]
    word = token.lower()
    base, _, ending = word.partition("'")
    if ending == "t" and base.endswith("n"):
        stem = _NOT_STEMS.get(base[:-1], base[:-1])
        return (_words(stem) if stem else []) + ["not"]
    if ending in _CLITICS:
        word = base
    if word in _NEGATIONS:
        return ["not"]
    return [] if word in COMMON else [word]


def normalised(text: str) -> str:
    """The text with its equivalent spellings made one (Unicode forms, apostrophes, arithmetic in
    words): what the guard reads, and what the cache's vectors embed, so that a rewording the
    guard accepts is not counted against the similarity too. Applying it twice changes nothing."""
    return spelled_arithmetic_to_symbols(unicodedata.normalize("NFKC", text).replace("’", "'"))


def answer_bearing(text: str) -> list[str]:
    """The answer-bearing tokens of a text, in order."""
    return [w for token in _TOKEN.findall(normalised(text)) for w in _words(token)]


def fingerprint(turns: list[tuple[str, str]]) -> str:
    """A digest of a conversation's answer-bearing tokens, turn by turn with each turn's role:
    prompts that may share an answer have the same one."""
    seq = []
    for role, text in turns:
        seq.append("\x00" + role)
        seq.extend(answer_bearing(text))
    return hashlib.sha256("\x01".join(seq).encode()).hexdigest()
