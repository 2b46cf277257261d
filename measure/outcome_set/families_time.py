"""Unit conversions, weekdays, durations between clock times and calendar months, by difficulty 1..3."""
from __future__ import annotations

from random import Random

from .question import Question, choice, number
from .tables import DAYS_IN_MONTH, MONTHS, NAMES, UNITS, WEEKDAYS


def units(rng: Random, level: int) -> Question:
    big, small, factor = rng.choice(UNITS)
    if level == 1:
        n = rng.randint(2, 9)
        return number(f"How many {small} are in {n} {big}?", n * factor)
    if level == 2:
        if rng.random() < 0.5:
            n = rng.randint(2, 12)
            return number(f"Convert {n * factor} {small} to {big}.", n)
        n = rng.randint(2, 19) + 0.5
        return number(f"How many {small} are in {n:g} {big}?", n * factor)
    n, m = rng.randint(2, 9), rng.randint(1, factor - 1)
    return number(f"How many {small} are in {n} {big} and {m} {small}?", n * factor + m, max_tokens=32)


def _clock(minutes: int) -> str:
    return f"{minutes // 60}:{minutes % 60:02d}"


def duration(rng: Random, level: int) -> Question:
    start = rng.randint(6, 14) * 60 + (rng.choice((0, 30)) if level == 1 else rng.randrange(0, 60, 5))
    if level == 1:
        hours = rng.randint(1, 6)
        return number(f"A train leaves at {_clock(start)} and arrives at {_clock(start + 60 * hours)}. "
                      "How many hours does the trip take?", hours, max_tokens=32)
    length = rng.randrange(5, 60, 5) if level == 2 else rng.randrange(65, 300, 5)
    if level == 2:
        start = start - start % 60 + rng.randrange(0, 60 - length + 1, 5) if length < 60 else start
    return number(f"A meeting starts at {_clock(start)} and ends at {_clock(start + length)}. "
                  "How many minutes long is it?", length, max_tokens=32)


def weekday(rng: Random, level: int) -> Question:
    today = rng.randrange(7)
    if level == 1:
        shift, asked = rng.choice(((1, "will it be tomorrow"), (-1, "was it yesterday"), (1, "is the next day"),
                                   (2, "will it be the day after tomorrow"), (-2, "was it the day before yesterday")))
        lead = rng.choice(("If today is {d}", "Today is {d}", "Suppose it is {d} today")).format(d=WEEKDAYS[today])
        return choice(f"{lead}. What day {asked}?", WEEKDAYS[(today + shift) % 7], WEEKDAYS)
    shift = rng.randint(3, 13) if level == 2 else rng.randint(15, 90)
    return choice(f"If today is {WEEKDAYS[today]}, what day of the week will it be in {shift} days?",
                  WEEKDAYS[(today + shift) % 7], WEEKDAYS)


def calendar(rng: Random, level: int) -> Question:
    month = rng.randrange(12)
    if level == 1:
        step, form = rng.choice(((1, "Which month comes right after {m}?"), (-1, "Which month comes right before {m}?"),
                                 (1, "What month follows {m}?"), (-1, "What month comes just before {m}?")))
        return choice(form.format(m=MONTHS[month]), MONTHS[(month + step) % 12], MONTHS)
    if level == 2:
        if rng.random() < 0.5:
            return number(f"How many days are there in {MONTHS[month]} (not a leap year)?", DAYS_IN_MONTH[month])
        step = rng.randint(2, 11)
        return choice(f"What month is it {step} months after {MONTHS[month]}?", MONTHS[(month + step) % 12], MONTHS)
    who = rng.choice(NAMES)
    born, year = rng.randint(1950, 2010), rng.randint(2015, 2040)
    if rng.random() < 0.5:
        return number(f"{who} was born in {born}. How old does {who} turn in {year}?", year - born, max_tokens=32)
    day = rng.randint(1, DAYS_IN_MONTH[month] - 1)
    left = DAYS_IN_MONTH[month] - day
    return number(f"Today is {MONTHS[month]} {day} (not a leap year). How many days are left in {MONTHS[month]} "
                  "after today?", left, max_tokens=32)
