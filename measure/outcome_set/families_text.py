"""String tasks: reversing, counting letters, picking letters, sorting and counting words, by difficulty 1..3."""
from __future__ import annotations

from random import Random

from .question import Question, choice, number, text
from .tables import WORDS


def _word(rng: Random, level: int) -> str:
    lengths = {1: range(3, 5), 2: range(5, 7), 3: range(7, 11)}[level]
    return rng.choice([w for w in WORDS if len(w) in lengths])


def reverse(rng: Random, level: int) -> Question:
    word = _word(rng, level)
    form = rng.choice(("Write the word '{w}' backwards.", "Reverse the letters of '{w}'.", "Spell '{w}' in reverse."))
    return text(form.format(w=word), word[::-1], hint="Answer with the reversed word only.")


def count_letters(rng: Random, level: int) -> Question:
    word = _word(rng, level)
    if rng.random() < 0.5:
        return number(f"How many letters are in the word '{word}'?", len(word))
    letter = rng.choice(sorted(set(word)))
    return number(f"How many times does the letter '{letter}' appear in '{word}'?", word.count(letter))


def pick_letter(rng: Random, level: int) -> Question:
    word = _word(rng, level)
    letters = tuple(dict.fromkeys(word))
    if level == 1:
        which, at = rng.choice((("first", 0), ("last", -1)))
        return choice(f"What is the {which} letter of the word '{word}'?", word[at], letters, hint="Answer with one letter.")
    at = rng.randrange(1, len(word) - 1)
    ordinal = ("second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")[at - 1]
    return choice(f"What is the {ordinal} letter of the word '{word}'?", word[at], letters, hint="Answer with one letter.")


def sort_words(rng: Random, level: int) -> Question:
    count = {1: 3, 2: 4, 3: 5}[level]
    words = rng.sample([w for w in WORDS if len(w) <= 8], count)
    while len({w[0] for w in words}) < count:  # distinct first letters keep the order unambiguous
        words = rng.sample([w for w in WORDS if len(w) <= 8], count)
    shown = ", ".join(words)
    if level == 1 or rng.random() < 0.3:
        return choice(f"Which of these words comes first in alphabetical order: {shown}?", min(words), words)
    return text(f"Sort these words in alphabetical order: {shown}.", ", ".join(sorted(words)), max_tokens=32,
                hint="Answer with the sorted words separated by commas.")


def count_words(rng: Random, level: int) -> Question:
    n = {1: rng.randint(3, 5), 2: rng.randint(6, 9), 3: rng.randint(10, 14)}[level]
    sentence = " ".join(rng.choice(WORDS) for _ in range(n))
    return number(f"How many words are in this list: \"{sentence}\"?", n)
