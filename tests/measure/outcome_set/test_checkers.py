"""The checkers accept right answers in the forms small models write them, and refuse wrong ones."""
from __future__ import annotations

import pytest

from measure.outcome_set.checkers import extract_choice, extract_number, is_correct, text_matches


def _item(kind: str, answer: str, question: str = "Q?", options=()) -> dict:
    check = {"kind": kind, **({"options": list(options)} if kind == "choice" else {})}
    return {"messages": [{"role": "user", "content": question}], "answer": answer, "check": check}


@pytest.mark.parametrize("reply,value", [
    ("42", 42), ("The answer is 42.", 42), ("3 + 4 = 7", 7), ("1,234 apples", 1234), ("It costs $12.50.", 12.5),
    ("-5", -5), ("10 - 15 = -5", -5), ("Answer: 7 (because 3 + 4)", 7), ("seven", 7), ("twenty-one", 21),
    ("The answer is 12. Then 3 more.", 12), ("3, 4, 5", 5), ("25%", 25), ("no number here", None),
])
def test_extract_number(reply, value):
    assert extract_number(reply) == value


def test_numbers_compare_by_value_not_by_text():
    item = _item("number", "58.5")
    assert is_correct(item, "58.50 feet") and is_correct(item, "The total is 58.5.")
    assert not is_correct(item, "58") and not is_correct(item, "585") and not is_correct(item, "I don't know")
    assert is_correct(_item("number", "1221"), "527 + 694 = 1,221")
    assert not is_correct(_item("number", "1221"), "527 + 694 = 1121")


WEEK = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@pytest.mark.parametrize("reply,picked", [
    ("Thursday", "Thursday"), ("thursday.", "Thursday"), ("Monday + 3 days = Thursday", "Thursday"),
    ("Thursday, because Monday comes three days before it", "Thursday"),
    ("Sure! The answer is Thursday, not Friday.", "Thursday"), ("I am not sure.", None),
])
def test_extract_choice_prefers_an_answer_the_question_did_not_name(reply, picked):
    assert extract_choice(reply, WEEK, "If today is Monday, what day will it be in 3 days?") == picked


def test_a_choice_among_options_the_question_names_is_the_first_one_said():
    item = _item("choice", "79", "Which is larger, 20 or 79?", ("20", "79"))
    assert is_correct(item, "79 is larger than 20.") and is_correct(item, "79")
    assert not is_correct(item, "20 is larger than 79.") and not is_correct(item, "I cannot tell")
    decimals = _item("choice", "2.4", "Which number is smaller, 2.4 or 2.72?", ("2.4", "2.72"))
    assert is_correct(decimals, "2.4") and not is_correct(decimals, "2.72 is smaller")
    assert not is_correct(decimals, "2.45")


def test_single_letters_count_only_quoted_or_standing_alone():
    item = _item("choice", "n", "What is the third letter of the word 'banana'?", ("b", "a", "n"))
    assert is_correct(item, "n") and is_correct(item, "The third letter is 'n'.") and is_correct(item, "It is N.")
    assert not is_correct(item, "It is a letter b.") and not is_correct(item, "The answer is a 'b'.")
    assert not is_correct(item, "banana")


def test_yes_no():
    item = _item("choice", "no", "Is 51 divisible by 2?", ("yes", "no"))
    assert is_correct(item, "No, 51 is odd.") and is_correct(item, "no")
    assert not is_correct(item, "Yes.") and not is_correct(item, "Yes, it is not odd, no doubt")


def test_text_answers_match_whole_words_in_order():
    assert text_matches("The word 'planet' backwards is 'tenalp'.", "tenalp")
    assert not text_matches("tenalps", "tenalp") and not text_matches("planet", "tenalp")
    assert text_matches("apple, cat, dog", "apple, cat, dog")
    assert text_matches("1. apple\n2. cat\n3. dog", "apple, cat, dog")
    assert not text_matches("cat, apple, dog", "apple, cat, dog")
    assert not text_matches("", "apple")
