"""Surface forms that change how a request looks but never its tier (RUBRIC.md): search-query
casing, typos, terse or chatty wording, system prompts, earlier turns, completion style."""
from __future__ import annotations

import random
import re

from .styles import EARLIER_TURNS, SYSTEM_PROMPTS

CHATTY_OPENERS = [
    "Hey, hope you're having a good day! So I've been meaning to ask about this for a while. ",
    "ok so my coworker and I were arguing about this at lunch and we couldn't settle it. ",
    "Sorry if this is a dumb question, I'm pretty new to all of this. ",
    "Hi!! Long time listener first time caller haha. Anyway, ",
    "I've spent the whole afternoon on this and I'm getting nowhere, any help appreciated. ",
    "My teacher mentioned this today and I didn't want to ask in class. ",
    "This is for a side project I'm doing on weekends, nothing urgent. ",
    "Good evening. I hope this message finds you well. ",
]
CHATTY_CLOSERS = [" Thanks a ton!!", " Appreciate it :)", " No rush.", " cheers",
                  " Let me know if you need more context.", " thx in advance", " You're the best."]
TERSE_DROPS = re.compile(r"^(?:please |can you |could you |hey,? |hi,? |i need you to )", re.I)
_QUERY_DROPS = re.compile(r"^(?:what is |what's |whats |how do i |how to |can you |please |tell me )", re.I)
_KEYBOARD_NEAR = {"a": "s", "e": "r", "i": "o", "o": "p", "n": "m", "t": "r", "s": "d", "r": "t", "l": "k"}
SYSTEM_EXTRA = [
    "You are Tiergate's assistant. Answer in the user's language.",
    "You are a coding assistant inside an IDE. Prefer short code blocks.",
    "Be accurate. If you are not sure, say so.",
    "You are a helpful, harmless and honest assistant. Today's date is 2026-11-23.",
    "You are a math tutor. Show steps when the problem needs them.",
]


def search_query(text: str) -> str:
    """How people type into a search box: lower-case, no trailing punctuation, no preamble."""
    first_line, sep, rest = text.partition("\n")
    q = _QUERY_DROPS.sub("", first_line.strip()).lower().rstrip("?.! ")
    return q + sep + rest


def typos(rng: random.Random, text: str, rate: float = 0.08) -> str:
    """Swap, drop or fat-finger letters in a few words (never inside code or pasted text)."""
    head, sep, rest = text.partition("\n")
    words = head.split(" ")
    for i, w in enumerate(words):
        if len(w) > 3 and w.isalpha() and rng.random() < rate * 3:
            j = rng.randrange(1, len(w) - 1)
            kind = rng.random()
            if kind < 0.4:
                w = w[:j] + w[j + 1] + w[j] + w[j + 2:]
            elif kind < 0.7:
                w = w[:j] + w[j + 1:]
            else:
                w = w[:j] + _KEYBOARD_NEAR.get(w[j].lower(), w[j]) + w[j + 1:]
            words[i] = w
    return " ".join(words) + sep + rest


def terse(text: str) -> str:
    return TERSE_DROPS.sub("", text.strip()).rstrip(".")


def chatty(rng: random.Random, text: str) -> str:
    return rng.choice(CHATTY_OPENERS) + text + rng.choice(CHATTY_CLOSERS)


SURFACES = ("plain", "query", "typos", "terse", "chatty", "system", "multiturn", "completion")


def render(rng: random.Random, text: str, surface: str) -> tuple[dict, str]:
    """One request body (`messages` or `prompt`) for a task in the named surface form."""
    if surface == "query":
        text = search_query(text)
    elif surface == "typos":
        text = typos(rng, text if rng.random() < 0.5 else text.lower())
    elif surface == "terse":
        text = terse(text)
    elif surface == "chatty":
        text = chatty(rng, text)
    if surface == "completion":
        return {"prompt": text}, "completion"
    messages = []
    if surface == "system" or rng.random() < 0.15:
        messages.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS + SYSTEM_EXTRA)})
    if surface == "multiturn":
        messages += [{"role": r, "content": c} for r, c in rng.choice(EARLIER_TURNS)]
    messages.append({"role": "user", "content": text})
    return {"messages": messages}, "chat+" + surface
