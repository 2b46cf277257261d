"""The outcome set's questions: every family's template drawn at difficulty 1, 2 and 3 in turn, from a
generator seeded per family (a family's items do not move when another's count changes), duplicates
of a question text skipped.

    {"id": "add_sub-0001", "family": "add_sub", "difficulty": 1, "messages": [{"role": "user", ...}],
     "answer": "12", "check": {"kind": "number"}, "max_tokens": 24}
"""
from __future__ import annotations

from random import Random

from . import families_math as math_
from . import families_reasoning as reasoning
from . import families_text as text_
from . import families_time as time_
from .question import CHOICE

SEED = 53  # the issue that asked for the set
# family -> (template, items); 2,400 in all
FAMILIES = {
    "add_sub": (math_.add_sub, 180), "mul_div": (math_.mul_div, 150), "expression": (math_.expression, 120),
    "percent": (math_.percent, 90), "word_problem": (math_.word_problem, 180), "sequence": (math_.sequence, 120),
    "units": (time_.units, 150), "duration": (time_.duration, 120), "weekday": (time_.weekday, 120),
    "calendar": (time_.calendar, 90),
    "reverse": (text_.reverse, 120), "count_letters": (text_.count_letters, 120),
    "pick_letter": (text_.pick_letter, 90), "sort_words": (text_.sort_words, 90),
    "count_words": (text_.count_words, 60),
    "lookup": (reasoning.lookup, 150), "compare": (reasoning.compare, 120), "divisible": (reasoning.divisible, 90),
    "ordering": (reasoning.ordering, 120), "facts": (reasoning.facts, 120),
}
LEVELS = (1, 2, 3)
MAX_TRIES = 50  # draws per wanted item before a family is declared too small for its count


def family_items(name: str, seed: int = SEED) -> list[dict]:
    template, count = FAMILIES[name]
    rng, items, seen = Random(f"{seed}/{name}"), [], set()
    for attempt in range(count * MAX_TRIES):
        if len(items) == count:
            return items
        difficulty = LEVELS[len(items) % len(LEVELS)]
        q = template(rng, difficulty)
        if q.text in seen:
            continue
        seen.add(q.text)
        check = {"kind": q.kind, **({"options": list(q.options)} if q.kind == CHOICE else {})}
        items.append({"id": f"{name}-{len(items) + 1:04d}", "family": name, "difficulty": difficulty,
                      "messages": [{"role": "user", "content": q.text}], "answer": q.answer, "check": check,
                      "max_tokens": q.max_tokens})
    raise RuntimeError(f"family {name!r} yields fewer than {count} distinct questions")


def generate(seed: int = SEED) -> list[dict]:
    return [item for name in FAMILIES for item in family_items(name, seed)]
