"""Whether a model's reply gives the reference answer, by the question's checker kind.

Small models wrap answers in words ("The answer is 42.", "3 + 4 = 7", "It will be Tuesday"), so
each kind extracts the answer the reply commits to, in this order: what follows an explicit
marker ("answer is", "answer:"); then the kind's own rule (the last number; the first option
named that the question did not already name; the reference as a whole phrase)."""
from __future__ import annotations

import re

from .question import CHOICE, NUMBER, TEXT

_MARKER = re.compile(r"(?:answer\s*(?:is|:|=)|answer\s+would\s+be|result\s*(?:is|:|=))", re.IGNORECASE)
# 1,234 (groups of three) before plain digits, so "1,234" is one number but "3, 4" two
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
_UNITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                     "fourteen fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if i > 1}
_NUMBER_WORD = re.compile(r"\b(?:(" + "|".join(_TENS) + r")(?:[\s-](" + "|".join(list(_UNITS)[1:10]) + r"))?|("
                          + "|".join(_UNITS) + r"))\b", re.IGNORECASE)
TOLERANCE = 1e-6


def _after_marker(reply: str) -> str | None:
    found = list(_MARKER.finditer(reply))
    return reply[found[-1].end():] if found else None


def _numbers(text: str) -> list[float]:
    values = [float(m.group().replace(",", "")) for m in _NUMBER.finditer(text)]
    if values:
        return values
    words = []
    for m in _NUMBER_WORD.finditer(text):
        tens, unit, alone = (g.lower() if g else None for g in m.groups())
        words.append(float(_UNITS[alone] if alone else _TENS[tens] + (_UNITS[unit] if unit else 0)))
    return words


def extract_number(reply: str) -> float | None:
    """The number the reply commits to: the first after the last answer marker, else its last number."""
    tail = _after_marker(reply)
    if tail is not None and _numbers(tail):
        return _numbers(tail)[0]
    values = _numbers(reply)
    return values[-1] if values else None


def _option_pattern(option: str) -> re.Pattern:
    body = re.escape(option)
    if len(option) == 1 and option.isalpha():  # a letter counts quoted, or alone before punctuation or the end
        return re.compile(rf"(?:['\"]{body}['\"]|(?<![\w'])\b{body}\b(?=\s*(?:[.,!;:)]|$)))", re.IGNORECASE)
    return re.compile(rf"(?<![\w.]){body}(?![\w]|\.\d)", re.IGNORECASE)


def _named(text: str, options) -> list[str]:
    """Options named in the text, in order of first appearance."""
    hits = sorted((m.start(), option) for option in options for m in _option_pattern(option).finditer(text))
    return list(dict.fromkeys(option for _, option in hits))


def extract_choice(reply: str, options, question: str = "") -> str | None:
    """The option the reply commits to: the first named after the last answer marker, else the first
    named that the question does not name itself, else the first named."""
    tail = _after_marker(reply)
    if tail is not None and _named(tail, options):
        return _named(tail, options)[0]
    named = _named(reply, options)
    if not named:
        return None
    asked = set(_named(question, options))
    fresh = [option for option in named if option not in asked]
    return (fresh or named)[0]


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def text_matches(reply: str, reference: str) -> bool:
    """The reference's words, in order and as whole words, appear in the reply (case and punctuation aside)."""
    want, said = _words(reference), _words(reply)
    if not re.search(r"\d", want):  # list numbering ("1. apple 2. cat") is not part of a word answer
        said = " ".join(w for w in said.split() if not w.isdigit())
    return bool(want) and re.search(rf"(?<![a-z0-9]){re.escape(want)}(?![a-z0-9])", said) is not None


def is_correct(item: dict, reply: str) -> bool:
    """Whether `reply` answers the generated `item` (generate.py) right."""
    kind, reference = item["check"]["kind"], item["answer"]
    if kind == NUMBER:
        value = extract_number(reply)
        return value is not None and abs(value - float(reference)) <= TOLERANCE * max(1.0, abs(float(reference)))
    if kind == CHOICE:
        question = item["messages"][-1]["content"]
        picked = extract_choice(reply, item["check"]["options"], question)
        return picked is not None and picked.lower() == reference.lower()
    if kind == TEXT:
        return text_matches(reply, reference)
    raise ValueError(f"unknown checker kind {kind!r}")
