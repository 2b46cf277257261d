"""Rows from the hand-written request pools, each rendered in several surface forms.

Every pool entry is one whole request, so a split holds whole entries: validation, test and
heldout entries never appear in training in any surface form. Tiers get about the same
number of rows however long their pool is; the calibration sets realistic shares later.
"""
from __future__ import annotations

import hashlib
import math
import random

from .pool_complex import COMPLEX
from .pool_expert import EXPERT
from .pool_languages import OTHER_LANGUAGES
from .pool_medium import MEDIUM
from .pool_more import MORE
from .pool_ordinary import ORDINARY
from .pool_simple import SIMPLE
import re

from .fillers import GLOBAL_SLOTS, code_snippet, document
from .surface import SURFACES, render

ROWS_PER_TIER = 2100
# entry -> split by a stable hash of its text (not of its position, so adding entries
# never moves the others)
ENTRY_SPLITS = (("train", 0.7), ("validation", 0.1), ("test", 0.1), ("heldout", 0.1))
# only these names are slots: pool entries contain LaTeX braces such as \\mathbb{R}
_SLOT = re.compile(r"\{(document|code|" + "|".join(GLOBAL_SLOTS) + r")\}")


def fill(rng: random.Random, text: str) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1)
        if name == "document":
            return document(rng, rng.randint(25, 70) if rng.random() < 0.4 else rng.randint(3, 10))
        if name == "code":
            return code_snippet(rng, long=rng.random() < 0.3)
        return rng.choice(GLOBAL_SLOTS[name])
    return _SLOT.sub(value, text)


def entries() -> list[tuple[int, str]]:
    english = [(1, t) for t in SIMPLE] + [(2, t) for t in MEDIUM] + [(3, t) for t in COMPLEX] + [(4, t) for t in EXPERT]
    return english + list(OTHER_LANGUAGES) + list(MORE) + list(ORDINARY)


def split_of(text: str) -> str:
    roll = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 2**32
    acc = 0.0
    for name, share in ENTRY_SPLITS:
        acc += share
        if roll < acc:
            return name
    return ENTRY_SPLITS[-1][0]


def rows(rng: random.Random) -> list[tuple[str, dict]]:
    """(split, row) pairs for every pool entry in its surface forms."""
    items = entries()
    per_tier = {t: sum(1 for tier, _ in items if tier == t) for t in (1, 2, 3, 4)}
    out = []
    for index, (tier, text) in enumerate(items):
        variants = math.ceil(ROWS_PER_TIER / per_tier[tier])
        surfaces = [SURFACES[(index + k) % len(SURFACES)] for k in range(variants)]
        for surface in surfaces:
            body, style = render(rng, fill(rng, text), surface)
            out.append((split_of(text), {**body, "tier": tier, "template": f"pool/{index}",
                                         "domain": "pool", "style": style}))
    return out
