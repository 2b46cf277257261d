"""Could the router's own sentence vectors decide a semantic cache hit? `python -m benchmarks.semantic_pairs`.

Issue 59's semantic cache would serve a cached answer to a *similar* prompt. Before building
it, this measures the risk on pairs written by this script (templates and word lists of our
own, seeded; no public data set):

- near duplicates with different answers: a short question with one entity or number swapped
  ("capital of France" / "of Japan", "17 plus 5" / "17 plus 6", a unit, a language), and a long
  prompt (a generated report of about 1,500 characters) whose one changed fact sits in the
  middle, with the question at the end;
- paraphrases with the same answer: the same question asked in another template.

For each pair the cosine of the router's static vectors (classifier/static_vectors.py: head and
tail of the text, mean-pooled); a hit is a cosine at or above a threshold. Reported per
threshold: the wrong-answer rate (near duplicates that would hit) and the paraphrase hit rate,
each with a Wilson 95% interval, alone and with an exact guard (a hit also needs the same
numbers, quoted and capitalised words in both prompts, in order). The last line is one JSON object: the lowest
threshold whose wrong-answer interval stays under 1%, and the paraphrase hit rate there.
"""
from __future__ import annotations

import json
import math
import random
import re

COUNTRIES = ["France", "Japan", "Peru", "Kenya", "Norway", "Chile", "Egypt", "Canada", "Poland", "Vietnam",
             "Ghana", "Spain", "Nepal", "Cuba", "Italy", "Mexico", "Sweden", "India", "Greece", "Brazil"]
LANGUAGES = ["French", "German", "Spanish", "Italian", "Dutch", "Polish", "Swedish", "Turkish"]
WORDS = ["window", "river", "candle", "bridge", "garden", "ladder", "pencil", "mirror", "blanket", "kettle"]
UNITS = [("kilometres", "miles"), ("litres", "gallons"), ("kilograms", "pounds"), ("metres", "feet")]
NAMES = ["Ada", "Bram", "Chen", "Dalia", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun"]

CAPITAL = ["What is the capital of {c}?", "Which city is the capital of {c}?", "Name the capital city of {c}.",
           "Tell me the capital of {c}.", "{c}'s capital is which city?"]
SUM = ["What is {a} plus {b}?", "Add {a} and {b}.", "Compute {a} + {b}.", "What do you get when you add {a} to {b}?",
       "Give the sum of {a} and {b}."]
TRANSLATE = ["Translate the word '{w}' into {l}.", "How do you say '{w}' in {l}?", "What is '{w}' in {l}?",
             "Give me the {l} word for '{w}'."]
CONVERT = ["Convert {n} {u} to {v}.", "How many {v} is {n} {u}?", "Express {n} {u} in {v}.",
           "What is {n} {u} in {v}?"]
REPORT_LINES = ["The quarterly review of the {team} team covered staffing, tooling and the release calendar.",
                "Meetings moved to Tuesday mornings so that the support rotation could be shared more evenly.",
                "The build farm was upgraded and nightly runs now finish before the first stand-up of the day.",
                "Two interns joined in the second month and paired with the on-call engineers for a week each.",
                "Customer tickets about login delays fell after the cache settings were reviewed in detail.",
                "The documentation sprint rewrote the onboarding guide and removed pages nobody had opened.",
                "Budget for travel stayed flat, and the offsite was replaced by two shorter local workshops."]
FACT = "The team's deployment count for the quarter was {n}, and the incident owner was {name}."
ASK = "Based on the report above, how many deployments did the team make and who owned the incidents?"


def _capital(rng):
    a, b = rng.sample(COUNTRIES, 2)
    t1, t2 = rng.sample(CAPITAL, 2)
    return (t1.format(c=a), t1.format(c=b)), (t1.format(c=a), t2.format(c=a))


def _sum(rng):
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    t1, t2 = rng.sample(SUM, 2)
    return (t1.format(a=a, b=b), t1.format(a=a, b=b + rng.choice((1, 2, 10)))), (t1.format(a=a, b=b), t2.format(a=a, b=b))


def _translate(rng):
    w = rng.choice(WORDS)
    l1, l2 = rng.sample(LANGUAGES, 2)
    t1, t2 = rng.sample(TRANSLATE, 2)
    return (t1.format(w=w, l=l1), t1.format(w=w, l=l2)), (t1.format(w=w, l=l1), t2.format(w=w, l=l1))


def _convert(rng):
    n = rng.randint(2, 500)
    u, v = rng.choice(UNITS)
    t1, t2 = rng.sample(CONVERT, 2)
    swapped = t1.format(n=n, u=v, v=u)  # the other direction: another answer
    return (t1.format(n=n, u=u, v=v), swapped), (t1.format(n=n, u=u, v=v), t2.format(n=n, u=u, v=v))


def _report(rng):
    team = rng.choice(["platform", "billing", "search", "mobile"])
    lines = [line.format(team=team) for line in REPORT_LINES]
    rng.shuffle(lines)
    n, name = rng.randint(20, 90), rng.choice(NAMES)
    other = rng.choice([x for x in NAMES if x != name])

    def prompt(count, owner, ask=ASK):
        middle = len(lines) // 2
        body = lines[:middle] * 2 + [FACT.format(n=count, name=owner)] + lines[middle:] * 2
        return " ".join(body) + "\n\n" + ask

    reworded = "From the report, how many deployments were made, and who was the incident owner?"
    return (prompt(n, name), prompt(n + 3, other)), (prompt(n, name), prompt(n, name, reworded))


KINDS = (_capital, _sum, _translate, _convert, _report)
SALIENT = re.compile(r"\d+|(?<![.?!]\s)(?<!^)\b[A-Z][a-z]+\b|'[^']+'")  # not a sentence's first word


def pairs(per_kind: int, seed: int = 59):
    """(near duplicates with different answers, paraphrases with the same answer), each a list of pairs."""
    rng = random.Random(seed)
    near, same = [], []
    for kind in KINDS:
        for _ in range(per_kind):
            a, b = kind(rng)
            near.append(a)
            same.append(b)
    return near, same


def guarded(a: str, b: str) -> bool:
    """The exact guard: both prompts name the same numbers, quoted words and capitalised words
    (a sentence's first word aside), in the same order."""
    return SALIENT.findall(a) == SALIENT.findall(b)


def wilson(k: int, n: int, z: float = 1.96) -> list[float]:
    if n == 0:
        return [0.0, 1.0]
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def _rate(hits: int, n: int) -> dict:
    return {"rate": round(hits / n, 4), "ci95": wilson(hits, n), "n": n}


def main() -> None:
    from classifier.static_vectors import packaged

    vectors = packaged()
    near, same = pairs(per_kind=60)
    cos = lambda a, b: float(vectors.embed(a) @ vectors.embed(b))  # noqa: E731
    near_sim = [(cos(a, b), guarded(a, b)) for a, b in near]
    same_sim = [(cos(a, b), guarded(a, b)) for a, b in same]
    rows = []
    for step in range(70, 101):
        t = step / 100
        row = {"threshold": t}
        for name, use_guard in (("similarity", False), ("guarded", True)):
            wrong = sum(s >= t and (g or not use_guard) for s, g in near_sim)
            hit = sum(s >= t and (g or not use_guard) for s, g in same_sim)
            row[name] = {"wrong_answer": _rate(wrong, len(near_sim)), "paraphrase_hit": _rate(hit, len(same_sim))}
        rows.append(row)
        print(json.dumps(row))
    by_kind = {}
    for i, kind in enumerate(KINDS):
        chunk = near_sim[i * 60:(i + 1) * 60]
        by_kind[kind.__name__.strip("_")] = {"near_duplicate_cos_min": round(min(s for s, _ in chunk), 4),
                                             "near_duplicate_cos_median": round(sorted(s for s, _ in chunk)[30], 4)}
    best = {}
    for name in ("similarity", "guarded"):
        safe = [r for r in rows if r[name]["wrong_answer"]["ci95"][1] <= 0.01]
        best[name] = ({"threshold": safe[0]["threshold"], **safe[0][name]} if safe else None)
    print(json.dumps({"benchmark": "semantic_pairs", "near_duplicate_pairs": len(near), "paraphrase_pairs": len(same),
                      "vectors": "classifier/static_vectors (router)", "lowest_safe": best, "by_kind": by_kind}))


if __name__ == "__main__":
    main()
