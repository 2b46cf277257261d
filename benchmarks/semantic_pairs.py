"""The semantic cache's safety and use on written pairs: `python -m benchmarks.semantic_pairs`.

A semantic hit serves a cached answer to a *similar* prompt; a near duplicate whose answer
differs ("capital of Austria" / "of Australia") served so is a silent wrong answer. The pairs
are written by this script (templates and word lists of our own, seeded; no public data set),
45 per kind, nine kinds:

- near duplicates with different answers: an entity, a number, a language, a conversion's
  direction, a negation or a question word (when/where/why/how) changed in a short question;
  and a long prompt (a generated report of ~1,500 characters) whose one changed fact (a number
  and a name, or a cause and a trend) sits in the middle, with the question at the end;
- paraphrases with the same answer: the question in another template (other content words),
  or the same question wrapped, re-cased or asked politely (as repeats to an FAQ bot are).

For each pair: the cosine of the router's static vectors (classifier/static_vectors.py, head and
tail mean-pooled) of the prompts as the cache embeds them (gateway/cache/semantic.embed) and whether the cache's guard lets it through (the same answer-bearing tokens
in order, gateway/cache/answer_bearing.py). Printed: a sweep of thresholds with and without the
guard, the served counts per kind at the default, and last one JSON object: the wrong-answer
rate of served hits and the paraphrase hit rate (Wilson 95% intervals) at the default policy
(policies/config.SemanticCachePolicy), before and after the quality monitor judged a sample of
the served hits (`sample_rate`; a served near duplicate fails, a paraphrase passes; failures
raise the bar, gateway/cache/similarity_bar.py), with the guard and, for contrast, without it;
and the wrong answers served among near twins of the guard's spelling rules (semantic_twins.py).
"""
from __future__ import annotations

import json
import math
import random

from benchmarks.semantic_twins import twins
from gateway.cache.answer_bearing import fingerprint

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


QUESTIONS = ["What is the population of {c}?", "What currency does {c} use?", "What is the official language of {c}?",
             "Which mountain range runs through {c}?", "What is the national dish of {c}?"]
WRAPPERS = ["Please answer briefly: {q}", "Hi! Quick question. {q}", "{q} Thanks!", "Can you tell me this: {q}",
            "{lower}", "Hello, I need help. {q}"]
MEMBERSHIP = ["Name a country in {r} that is {neg}a member of the {org}.", "Give one country of {r} that is {neg}in the {org}."]
REGIONS = [("Europe", "European Union"), ("Africa", "African Union"), ("Asia", "ASEAN"), ("America", "OAS")]
WHEN_WHERE = ["{w} was the treaty of {c} signed?", "{w} did the first railway in {c} open?",
              "{w} was the national anthem of {c} first performed?"]
CAUSES = ["database", "firewall", "certificate", "scheduler", "router", "disk controller"]
CAUSE = "The outage on the main site was traced to the {cause}, and service recovered {trend} than the target."
CAUSE_ASK = "What caused the outage described above, and was the recovery within the target?"


def _wrap(rng, question: str) -> str:
    wrapper = rng.choice(WRAPPERS)
    return wrapper.format(q=question, lower=question.lower().rstrip("?") + " ?")


def _entity_question(rng):
    a, b = rng.sample(COUNTRIES, 2)
    t = rng.choice(QUESTIONS)
    return (t.format(c=a), t.format(c=b)), (t.format(c=a), _wrap(rng, t.format(c=a)))


def _negation(rng):
    (r, org), t = rng.choice(REGIONS), rng.choice(MEMBERSHIP)
    yes, no = t.format(r=r, org=org, neg=""), t.format(r=r, org=org, neg="not ")
    asked = rng.choice((yes, no))
    return (yes, no), (asked, _wrap(rng, asked))


def _when_where(rng):
    c, t = rng.choice(COUNTRIES), rng.choice(WHEN_WHERE)
    w1, w2 = rng.sample(["When", "Where", "Why", "How"], 2)
    return (t.format(w=w1, c=c), t.format(w=w2, c=c)), (t.format(w=w1, c=c), _wrap(rng, t.format(w=w1, c=c)))


def _report_cause(rng):
    team = rng.choice(["platform", "billing", "search", "mobile"])
    lines = [line.format(team=team) for line in REPORT_LINES]
    rng.shuffle(lines)
    c1, c2 = rng.sample(CAUSES, 2)
    trend = rng.choice(["faster", "slower"])
    other_trend = "slower" if trend == "faster" else "faster"

    def prompt(cause, pace, ask=CAUSE_ASK):
        middle = len(lines) // 2
        body = lines[:middle] * 2 + [CAUSE.format(cause=cause, trend=pace)] + lines[middle:] * 2
        return " ".join(body) + "\n\n" + ask

    swapped = prompt(c2, trend) if rng.random() < 0.5 else prompt(c1, other_trend)
    return (prompt(c1, trend), swapped), (prompt(c1, trend), prompt(c1, trend, "Please answer: " + CAUSE_ASK))


KINDS = (_capital, _sum, _translate, _convert, _report, _entity_question, _negation, _when_where, _report_cause)


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
    """The semantic cache's guard (gateway/cache/answer_bearing.py): the same answer-bearing
    tokens, in order, over the whole prompt."""
    return fingerprint([("user", a)]) == fingerprint([("user", b)])


def wilson(k: int, n: int, z: float = 1.96) -> list[float]:
    if n == 0:
        return [0.0, 1.0]
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def _rate(hits: int, n: int) -> dict:
    return {"rate": round(hits / n, 4), "ci95": wilson(hits, n), "n": n}


def _served(sims, needed: float) -> int:
    return sum(s >= needed and g for s, g in sims)


def _at_bar(near_sim, same_sim, needed: float) -> dict:
    return {"similarity_needed": round(needed, 4), "wrong_answer": _rate(_served(near_sim, needed), len(near_sim)),
            "paraphrase_hit": _rate(_served(same_sim, needed), len(same_sim))}


def _monitored(near_sim, same_sim, policy, sample_rate: float, seed: int = 59) -> tuple[dict, int]:
    """The default setting after the quality monitor judged a sample of the hits served at it
    (a served near duplicate fails, a served paraphrase passes): the bar the failures raise."""
    from gateway.cache.similarity_bar import SimilarityBar

    bar, rng = SimilarityBar(), random.Random(seed)
    served = [(s, True) for s, g in same_sim if g and s >= policy.min_similarity]
    served += [(s, False) for s, g in near_sim if g and s >= policy.min_similarity]
    rng.shuffle(served)
    sampled = [passed for _, passed in served if rng.random() < sample_rate]
    for passed in sampled:
        bar.record("bench", passed, policy.window)
    return _at_bar(near_sim, same_sim, bar.needed("bench", policy)), len(sampled)


def main(per_kind: int = 45, sample_rate: float = 0.2) -> None:
    from gateway.cache.semantic import embed
    from policies.cache_policy import SemanticCachePolicy

    policy = SemanticCachePolicy()
    near, same = pairs(per_kind=per_kind)
    cos = lambda a, b: float(embed([("user", a)]) @ embed([("user", b)]))  # noqa: E731
    near_sim = [(cos(a, b), guarded(a, b)) for a, b in near]
    twin_sim = [(cos(a, b), guarded(a, b)) for a, b in twins(per_rule=per_kind)]
    same_sim = [(cos(a, b), guarded(a, b)) for a, b in same]
    for step in range(70, 101, 2):
        t = step / 100
        row = {"threshold": t}
        for name, use_guard in (("similarity", False), ("guarded", True)):
            wrong = sum(s >= t and (g or not use_guard) for s, g in near_sim)
            hit = sum(s >= t and (g or not use_guard) for s, g in same_sim)
            row[name] = {"wrong_answer": _rate(wrong, len(near_sim)), "paraphrase_hit": _rate(hit, len(same_sim))}
        print(json.dumps(row))
    by_kind = {}
    for i, kind in enumerate(KINDS):
        chunk = slice(i * per_kind, (i + 1) * per_kind)
        by_kind[kind.__name__.strip("_")] = {
            "wrong_served": _served(near_sim[chunk], policy.min_similarity),
            "paraphrases_served": _served(same_sim[chunk], policy.min_similarity), "of": per_kind}
    print(json.dumps({"by_kind": by_kind}))
    after, sampled = _monitored(near_sim, same_sim, policy, sample_rate)
    bare = ([(c, True) for c, _ in near_sim], [(c, True) for c, _ in same_sim])  # cosine alone, no guard
    bare_after, bare_sampled = _monitored(*bare, policy, sample_rate)
    print(json.dumps({"benchmark": "semantic_pairs", "near_duplicate_pairs": len(near), "paraphrase_pairs": len(same),
                      "vectors": "classifier/static_vectors (router)", "guard": "gateway/cache/answer_bearing",
                      "default": {"min_similarity": policy.min_similarity, "failure_step": policy.failure_step},
                      "before_monitor": _at_bar(near_sim, same_sim, policy.min_similarity),
                      "after_monitor": {**after, "sampled_hits": sampled, "sample_rate": sample_rate},
                      "without_guard": {"before_monitor": _at_bar(*bare, policy.min_similarity),
                                        "after_monitor": {**bare_after, "sampled_hits": bare_sampled}},
                      "spelling_rule_twins": {"pairs": len(twin_sim), "source": "benchmarks/semantic_twins",
                                              "distinct": len(set(twins(per_rule=per_kind))),
                                              "wrong_answer": _rate(_served(twin_sim, policy.min_similarity),
                                                                    len(twin_sim)),
                                              "without_guard": _rate(sum(c >= policy.min_similarity for c, _ in twin_sim),
                                                                     len(twin_sim))},
                      "goals": {"wrong_answer_max": 0.01, "paraphrase_hit_min": 0.5}}))


if __name__ == "__main__":
    main()
