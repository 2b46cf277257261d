"""Cheap checks on a cheap tier's answer, judged against the top tier's answer to the same request.

Each returns True when the candidate fails it. They are relative on purpose: an answer the
top tier also cut at max_tokens is not "truncated", a refusal the top tier also gives is
not a quality problem, and a reply in the script the top tier used is the right language.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

REFUSAL = re.compile(
    r"\b(i(?:'m| am)? (?:sorry|afraid),? (?:but )?i (?:can(?:no|')t|am unable|won't)|"
    r"i (?:can(?:no|')t|am unable to|won't) (?:help|assist|answer|comply|provide|do that)|"
    r"as an ai(?: language model)?,? i (?:can(?:no|')t|don't|do not)|"
    r"i(?:'m| am) not able to (?:help|assist|answer|provide))",
    re.IGNORECASE)
MIN_LETTERS = 12  # below this, a script guess is noise


@dataclass(frozen=True)
class Answer:
    text: str
    finish_reason: str | None
    completion_tokens: int


def is_empty(candidate: Answer, reference: Answer) -> bool:
    return not candidate.text.strip() and bool(reference.text.strip())


def is_truncated(candidate: Answer, reference: Answer) -> bool:
    """Cut at max_tokens where the top tier was not, or cut shorter than the top tier's answer."""
    if candidate.finish_reason != "length":
        return False
    if reference.finish_reason != "length":
        return True
    if candidate.completion_tokens and reference.completion_tokens:
        return candidate.completion_tokens < reference.completion_tokens
    return len(candidate.text) < len(reference.text) // 2


def is_refusal(candidate: Answer, reference: Answer) -> bool:
    return bool(REFUSAL.search(candidate.text)) and not REFUSAL.search(reference.text)


def script_of(text: str) -> str | None:
    """The dominant writing system of the letters in text (LATIN, CYRILLIC, CJK, ...), or None."""
    scripts = Counter()
    for ch in text:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            scripts[name.split(" ")[0] if name else "UNKNOWN"] += 1
    total = sum(scripts.values())
    if total < MIN_LETTERS:
        return None
    script, _ = scripts.most_common(1)[0]
    return {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK"}.get(script, script)


def is_wrong_language(candidate: Answer, reference: Answer) -> bool:
    want, got = script_of(reference.text), script_of(candidate.text)
    return want is not None and got is not None and want != got


CHECKS = {"empty": is_empty, "truncated": is_truncated, "refusal": is_refusal, "wrong_language": is_wrong_language}


def failed_checks(candidate: Answer, reference: Answer) -> list[str]:
    return [name for name, check in CHECKS.items() if check(candidate, reference)]
