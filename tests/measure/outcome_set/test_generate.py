"""The outcome set's generator: deterministic, at least 2,000 distinct questions, every family at
every difficulty, and each reference answer is one its own checker accepts."""
from __future__ import annotations

from collections import Counter

from measure.outcome_set.answering import interleaved
from measure.outcome_set.checkers import is_correct
from measure.outcome_set.generate import FAMILIES, LEVELS, generate
from measure.outcome_set.question import CHOICE, KINDS


def test_the_same_seed_gives_the_same_items_and_another_seed_other_ones():
    assert generate() == generate()
    assert [i["messages"] for i in generate(seed=1)] != [i["messages"] for i in generate()]


def test_at_least_2000_distinct_questions_with_unique_ids():
    items = generate()
    assert len(items) >= 2000
    assert len({i["id"] for i in items}) == len(items)
    assert len({i["messages"][-1]["content"] for i in items}) == len(items)


def test_every_family_has_its_count_spread_evenly_over_the_difficulties():
    items = generate()
    per_family = Counter(i["family"] for i in items)
    assert per_family == {name: count for name, (_, count) in FAMILIES.items()}
    for name, (_, count) in FAMILIES.items():
        levels = Counter(i["difficulty"] for i in items if i["family"] == name)
        assert set(levels) == set(LEVELS) and max(levels.values()) - min(levels.values()) <= 1, name


def test_items_are_chat_requests_with_a_known_checker_and_a_token_budget():
    kinds = Counter()
    for item in generate():
        assert item["messages"] == [{"role": "user", "content": item["messages"][0]["content"]}]
        assert item["check"]["kind"] in KINDS and 8 <= item["max_tokens"] <= 64
        if item["check"]["kind"] == CHOICE:
            assert item["answer"] in item["check"]["options"]
        kinds[item["check"]["kind"]] += 1
    assert all(kinds[k] >= 100 for k in KINDS), kinds


def test_each_reference_answer_passes_its_own_checker_bare_and_in_a_sentence():
    for item in generate():
        assert is_correct(item, item["answer"]), item
        assert is_correct(item, f"The answer is {item['answer']}."), item


def test_answering_takes_the_families_in_turns():
    items = generate()
    order = interleaved(items)
    assert sorted(i["id"] for i in order) == sorted(i["id"] for i in items)
    first = order[:len(FAMILIES) * 3]
    assert Counter(i["family"] for i in first) == {name: 3 for name in FAMILIES}
    assert {i["difficulty"] for i in first} == set(LEVELS)
