"""One generated question before it gets its id: what is asked, the reference answer, and how a
reply is checked against it."""
from __future__ import annotations

from typing import NamedTuple

NUMBER, CHOICE, TEXT = "number", "choice", "text"  # the checker kinds (checkers.py)
KINDS = (NUMBER, CHOICE, TEXT)


class Question(NamedTuple):
    text: str  # the user's message, its answer-format hint included
    answer: str  # the reference answer, as text
    kind: str  # one of KINDS
    options: tuple[str, ...] = ()  # CHOICE: every answer the question makes plausible, the reference among them
    max_tokens: int = 28  # enough for a direct answer and a short lead-in


def number(text: str, value: int | float, max_tokens: int = 28) -> Question:
    shown = str(int(value)) if float(value).is_integer() else f"{value:g}"
    return Question(f"{text} Answer with a number.", shown, NUMBER, (), max_tokens)


def choice(text: str, answer: str, options, max_tokens: int = 24, hint: str = "Answer with one word.") -> Question:
    options = tuple(dict.fromkeys(options))
    if answer not in options:
        raise ValueError(f"the answer {answer!r} is not among the options {options}")
    return Question(f"{text} {hint}".strip(), answer, CHOICE, options, max_tokens)


def text(text: str, answer: str, max_tokens: int = 24, hint: str = "Answer with the result only.") -> Question:
    return Question(f"{text} {hint}".strip(), answer, TEXT, (), max_tokens)
