"""Arithmetic, multi-step word problems, percentages and number sequences, by difficulty 1..3."""
from __future__ import annotations

from random import Random

from .question import Question, number
from .tables import NAMES, OBJECTS


def _digits(rng: Random, n: int) -> int:
    return rng.randint(10 ** (n - 1) if n > 1 else 1, 10 ** n - 1)


def add_sub(rng: Random, level: int) -> Question:
    a, b = (_digits(rng, 1), _digits(rng, 1)) if level == 1 else \
        (_digits(rng, 2), _digits(rng, 2)) if level == 2 else (_digits(rng, rng.choice((3, 4))), _digits(rng, 3))
    if level > 1 and rng.random() < 0.5:
        a, b = max(a, b), min(a, b)
        form = rng.choice(("What is {a} - {b}?", "Subtract {b} from {a}.", "Compute {a} minus {b}."))
        return number(form.format(a=a, b=b), a - b)
    form = rng.choice(("What is {a} + {b}?", "Add {a} and {b}.", "Compute {a} plus {b}.", "{a} + {b} = ?"))
    return number(form.format(a=a, b=b), a + b)


def mul_div(rng: Random, level: int) -> Question:
    if level == 1:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
    elif level == 2:
        a, b = _digits(rng, 2), rng.randint(3, 9)
    else:
        a, b = _digits(rng, 2), _digits(rng, 2)
    if rng.random() < 0.4:  # an exact division built from the product
        form = rng.choice(("What is {p} divided by {b}?", "Compute {p} / {b}.", "How many times does {b} go into {p}?"))
        return number(form.format(p=a * b, b=b), a)
    form = rng.choice(("What is {a} times {b}?", "Multiply {a} by {b}.", "Compute {a} x {b}.", "What is {a} * {b}?"))
    return number(form.format(a=a, b=b), a * b)


def expression(rng: Random, level: int) -> Question:
    a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(2, 9)
    if level == 1:
        return number(f"What is {a} + {b} + {c}?", a + b + c)
    if level == 2:
        if rng.random() < 0.5:
            return number(f"What is {a} + {b} * {c}?", a + b * c)
        return number(f"What is ({a} + {b}) * {c}?", (a + b) * c)
    d = rng.randint(2, 20)
    big = a + b + rng.randint(1, 9)
    return number(f"What is ({big} - {a}) * {c} + {d}?", (big - a) * c + d)


def percent(rng: Random, level: int) -> Question:
    if level == 1:
        whole = rng.randint(2, 200) * 2
        return number(f"What is half of {whole}?", whole // 2)
    if level == 2:
        p, whole = rng.choice((10, 20, 25, 50)), rng.randint(1, 40) * 20
        return number(f"What is {p}% of {whole}?", p * whole // 100)
    p, price = rng.choice((10, 20, 25, 30, 40)), rng.randint(2, 30) * 10
    return number(f"A coat costs {price} dollars. It is on sale for {p}% off. What is the sale price in dollars?",
                  price - p * price // 100, max_tokens=32)


def word_problem(rng: Random, level: int) -> Question:
    who, other = rng.sample(NAMES, 2)
    one, many = rng.choice(OBJECTS)
    if level == 1:
        a, b = rng.randint(2, 15), rng.randint(2, 15)
        if rng.random() < 0.5:
            return number(f"{who} has {a} {many}. {other} gives {who} {b} more. How many {many} does {who} have now?",
                          a + b, max_tokens=32)
        return number(f"{who} has {a + b} {many} and gives {b} to {other}. How many {many} does {who} have left?",
                      a, max_tokens=32)
    if level == 2:
        boxes, per, extra = rng.randint(2, 9), rng.randint(3, 12), rng.randint(1, 9)
        return number(f"{who} buys {boxes} boxes with {per} {many} in each box, then finds {extra} more {many}. "
                      f"How many {many} does {who} have?", boxes * per + extra, max_tokens=40)
    price, count = rng.randint(2, 9), rng.randint(2, 8)
    paid = (price * count // 10 + 1 + rng.randint(0, 3)) * 10
    gift = rng.randint(1, count - 1)
    return number(f"Each {one} costs {price} dollars. {who} buys {count} {many}, pays with {paid} dollars, "
                  f"and gives {gift} of the {many} to {other}. How many dollars of change does {who} get?",
                  paid - price * count, max_tokens=48)


def sequence(rng: Random, level: int) -> Question:
    start = rng.randint(1, 20)
    if level == 1:
        step = rng.randint(1, 5)
        terms = [start + step * i for i in range(4)]
        following = start + step * 4
    elif level == 2:
        if rng.random() < 0.5:
            step = rng.randint(2, 9)
            start += step * 5
            terms = [start - step * i for i in range(4)]
            following = start - step * 4
        else:
            start, ratio = rng.randint(1, 5), rng.choice((2, 3))
            terms = [start * ratio ** i for i in range(4)]
            following = start * ratio ** 4
    else:
        if rng.random() < 0.5:
            offset = rng.randint(0, 12)
            terms = [(i + offset) ** 2 for i in range(1, 5)]
            following = (5 + offset) ** 2
        else:  # differences growing by one
            first = rng.randint(1, 4)
            terms = [start]
            for i in range(3):
                terms.append(terms[-1] + first + i)
            following = terms[-1] + first + 3
    shown = ", ".join(map(str, terms))
    return number(f"What number comes next in the sequence {shown}, ...?", following)
