"""Near twins of the semantic guard's spelling rules (gateway/cache/answer_bearing.normalised),
for `benchmarks.semantic_pairs`: pairs whose answers differ only in what a looser rule would
merge. Operands of a spelled-out operator swapped, or its operator changed; a negated
contraction against its plain verb; the same words in another order (who beat whom); a plural
against its singular. Written by this project from its own word lists, seeded."""
from __future__ import annotations

import random

COUNTRIES = ["France", "Japan", "Peru", "Kenya", "Norway", "Chile", "Egypt", "Canada", "Poland", "Vietnam"]
ORGS = ["European Union", "African Union", "ASEAN", "OAS", "Commonwealth"]


def _operands(rng):
    a, b = rng.sample(range(2, 99), 2)
    return rng.choice([
        (f"What is {a} minus {b}?", f"Subtract {a} from {b}."),
        (f"What is {a} minus {b}?", f"What is {b} - {a}?"),
        (f"Divide {a} by {b}.", f"What is {b} divided by {a}?"),
        (f"What is {a} plus {b}?", f"What is {a} times {b}?"),
        (f"Add {a} and {b}.", f"Multiply {a} by {b}."),
        (f"Add {a} and {b} times 3.", f"What is {a} plus {b} times 3?"),
    ])


def _contraction(rng):
    c, org = rng.choice(COUNTRIES), rng.choice(ORGS)
    return rng.choice([(f"Why can't {c} join the {org}?", f"Why can {c} join the {org}?"),
                       (f"Isn't {c} a member of the {org}?", f"Is {c} a member of the {org}?"),
                       (f"Why won't {c} leave the {org}?", f"Why will {c} leave the {org}?")])


def _order(rng):
    a, b = rng.sample(COUNTRIES, 2)
    return rng.choice([(f"Did {a} beat {b} in the final?", f"Did {b} beat {a} in the final?"),
                       (f"Is {a} north of {b}?", f"Is {b} north of {a}?"),
                       (f"Which team did {a} beat?", f"Which team beat {a}?")])


def _plural(rng):
    c = rng.choice(COUNTRIES)
    return rng.choice([(f"What is the official language of {c}?", f"What are the official languages of {c}?"),
                       (f"Name a river in {c}.", f"Name rivers in {c}."),
                       (f"Which city is the capital of {c}?", f"Which cities are capitals of {c}?")])


RULES = (_operands, _contraction, _order, _plural)


def twins(per_rule: int, seed: int = 61) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [rule(rng) for rule in RULES for _ in range(per_rule)]
