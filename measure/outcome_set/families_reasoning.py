"""Lookups in a table given in the prompt, comparisons, divisibility, ordering puzzles and facts from the
project's own small tables, by difficulty 1..3."""
from __future__ import annotations

from random import Random

from .question import Question, choice, number
from .tables import ANIMAL_LEGS, NAMES, OPPOSITES, SHOP, plural

YES_NO = ("yes", "no")


def lookup(rng: Random, level: int) -> Question:
    items = rng.sample(SHOP, {1: 3, 2: 5, 3: 6}[level])
    prices = {item: rng.randint(3, 60) for item in items}
    while len(set(prices.values())) < len(prices):  # distinct prices: one right answer to "cheapest"
        prices = {item: rng.randint(3, 60) for item in items}
    table = "\n".join(f"- {item}: {price} dollars" for item, price in prices.items())
    lead = f"Price list:\n{table}\n"
    if level == 1:
        item = rng.choice(items)
        return number(f"{lead}How many dollars does the {item} cost?", prices[item])
    if level == 2:
        pick, word = rng.choice(((max, "most expensive"), (min, "cheapest")))
        return choice(f"{lead}Which item is the {word}?", pick(prices, key=prices.get), items)
    a, b = rng.sample(items, 2)
    n = rng.randint(2, 4)
    return number(f"{lead}How many dollars do {n} {plural(a)} and one {b} cost together?", n * prices[a] + prices[b],
                  max_tokens=32)


def compare(rng: Random, level: int) -> Question:
    """A CHOICE among the numbers shown: "82 is larger than 45" names both, and the first one named is the pick."""
    if level == 1:
        values = [str(v) for v in rng.sample(range(1, 100), 2)]
        return choice(f"Which is larger, {values[0]} or {values[1]}?", max(values, key=int), values,
                      hint="Answer with the number.")
    if level == 2:
        whole = rng.randint(0, 9)
        a, b = whole + rng.randint(1, 9) / 10, whole + rng.randint(10, 99) / 100
        while a == b:
            b = whole + rng.randint(10, 99) / 100
        values = [f"{a:g}", f"{b:g}"]
        return choice(f"Which number is smaller, {values[0]} or {values[1]}?", min(values, key=float), values,
                      hint="Answer with the number.")
    values = [str(v) for v in rng.sample(range(100, 1000), 4)]
    pick, word = rng.choice(((max, "largest"), (min, "smallest")))
    return choice(f"Which is the {word} of these numbers: {', '.join(values)}?", pick(values, key=int), values,
                  hint="Answer with the number.")


def divisible(rng: Random, level: int) -> Question:
    d = {1: 2, 2: rng.choice((3, 5, 10)), 3: rng.choice((4, 6, 7, 9))}[level]
    n = rng.randint(10, 99 if level < 3 else 999)
    if level == 1:
        return choice(f"Is {n} an even number?", "yes" if n % 2 == 0 else "no", YES_NO, hint="Answer yes or no.")
    return choice(f"Is {n} divisible by {d}?", "yes" if n % d == 0 else "no", YES_NO, hint="Answer yes or no.")


def ordering(rng: Random, level: int) -> Question:
    count = {1: 2, 2: 3, 3: 4}[level]
    people = rng.sample(NAMES, count)  # tallest first
    trait, most, least = rng.choice((("taller", "tallest", "shortest"), ("older", "oldest", "youngest"),
                                     ("faster", "fastest", "slowest")))
    facts = [f"{people[i]} is {trait} than {people[i + 1]}." for i in range(count - 1)]
    rng.shuffle(facts)
    if count == 2:
        return choice(f"{facts[0]} Who is {trait}?", people[0], people, hint="Answer with a name.")
    ask, answer = rng.choice(((most, people[0]), (least, people[-1])))
    return choice(f"{' '.join(facts)} Who is {ask}?", answer, people, hint="Answer with a name.")


def facts(rng: Random, level: int) -> Question:
    animals = sorted(ANIMAL_LEGS)
    if level == 1:
        if rng.random() < 0.5:
            animal = rng.choice(animals)
            article = "an" if animal[0] in "aeiou" else "a"
            form = rng.choice(("How many legs does {a} {x} have?", "How many legs has {a} {x} got?"))
            return number(form.format(a=article, x=animal), ANIMAL_LEGS[animal])
        word = rng.choice(sorted(OPPOSITES))
        form = rng.choice(("What is the opposite of '{w}'?", "Give the opposite of the word '{w}'."))
        return choice(form.format(w=word), OPPOSITES[word], sorted(set(OPPOSITES.values())))
    a, b = rng.sample(animals, 2)
    if level == 2:
        n = rng.randint(2, 7)
        return number(f"How many legs do {n} {plural(a)} have in total?", n * ANIMAL_LEGS[a])
    n, m = rng.randint(2, 5), rng.randint(2, 5)
    return number(f"How many legs do {n} {plural(a)} and {m} {plural(b)} have in total?", n * ANIMAL_LEGS[a] + m * ANIMAL_LEGS[b],
                  max_tokens=32)
