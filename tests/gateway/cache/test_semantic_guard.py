"""The semantic cache's parts on their own: the guard reads answer-bearing tokens over the whole
prompt in order (each spelling rule with a rewording it accepts and a near twin it refuses), the index is bounded per scope by count and bytes, and sampled failures raise
the similarity a tenant's hit needs."""
from __future__ import annotations

import numpy as np
import pytest

from gateway.cache.answer_bearing import answer_bearing, fingerprint
from gateway.cache.prompt_text import MAX_PROMPT_CHARS, prompt_turns
from gateway.cache.semantic import embed
from gateway.cache.semantic_index import SemanticIndex
from gateway.cache.similarity_bar import SimilarityBar
from policies.cache_policy import SemanticCachePolicy

FILLER = " ".join(["The weekly meeting covered staffing, tooling and the release calendar of the team."] * 20)


def same(a: str, b: str) -> bool:
    return fingerprint([("user", a)]) == fingerprint([("user", b)])


@pytest.mark.parametrize("a, b", [
    ("What is the capital of Austria?", "What is the capital of Australia?"),
    ("What is 17 plus 5?", "What is 17 plus 6?"),
    ("What is 17 + 5?", "What is 17 - 5?"),
    ("Convert 40 kilometres to miles.", "Convert 40 miles to kilometres."),
    ("Name a country that is a member of the EU.", "Name a country that is not a member of the EU."),
    ("Is this allowed?", "Isn't this allowed?"),
    ("When was the treaty signed?", "Where was the treaty signed?"),
    ("Translate 'window' into French.", "Translate 'window' into German."),
    (FILLER + " The owner was Ada. " + FILLER + " Who owned it?", FILLER + " The owner was Ivo. " + FILLER + " Who owned it?"),
    (FILLER + " Sales rose. " + FILLER + " Summarise.", FILLER + " Sales fell. " + FILLER + " Summarise."),
    # near twins of the equivalent spellings below
    ("I can't swim.", "I can swim."),
    ("What is 5 minus 3?", "What is 3 minus 5?"),
    ("Subtract 3 from 5.", "What is 3 minus 5?"),
    ("What is 17 plus 5?", "What is 17 times 5?"),
    ("Add 17 and 5.", "Add 17 and 6."),
    ("Add 2 and 3 times 4.", "What is 2 plus 3 times 4?"),  # where "add" ends is unclear: left as written
    ("What is 2 + 3?", "What is 2 + 3 + 4?"),
    # order is kept for words too: who did what to whom
    ("Did Rome conquer Carthage?", "Did Carthage conquer Rome?"),
    ("Which team did Ada beat?", "Which team beat Ada?"),
    # no stemming: a plural or a name ending in s can change the answer
    ("What is the capital of Bolivia?", "What are the capitals of Bolivia?"),
    ("Who is Luca?", "Who is Lucas?"),
])
def test_a_different_answer_bearing_token_anywhere_is_another_question(a, b):
    assert not same(a, b)


@pytest.mark.parametrize("a, b", [
    ("What is the capital of France?", "Please tell me the capital of France."),
    ("What's the population of Peru?", "Hi! Quick question. What is the population of Peru?"),
    ("What currency does Japan use?", "what currency does japan use ?"),
    ("Is 1,000 more than 999?", "Is 1000 more than 999?"),
    # contractions, with either apostrophe; a quote is not a clitic
    ("What's 'mirror' in German?", "What is 'mirror' in German?"),
    ("I can’t swim, can I?", "I cannot swim, can I?"),
    ("It won't rain in Lima?", "It will not rain in Lima?"),
    # arithmetic in words is its symbols, operands in the order the operator takes them
    ("What is 17 plus 5?", "Add 17 and 5."),
    ("Give the sum of 17 and 5.", "Compute 17 + 5."),
    ("Subtract 3 from 5.", "What is 5 minus 3?"),
    ("What is 5 - 3?", "5 minus 3"),
    ("Calculate 6 times 7.", "What is 6 * 7?"),
    ("Multiply 6 by 7.", "6 multiplied by 7"),
    ("Divide 1,000 by 8.", "What is 1000 divided by 8?"),
])
def test_a_rewording_in_common_words_or_an_equivalent_spelling_keeps_the_fingerprint(a, b):
    assert same(a, b)


def test_arithmetic_words_become_symbols_only_between_numbers():
    assert answer_bearing("Subtract 3 from 5, then add 2 and 4.") == ["5", "−", "3", "2", "+", "4"]
    assert answer_bearing("Is Disney plus sold in Peru?") == ["disney", "plus", "sold", "peru"]
    assert answer_bearing("A well-known 2-3 split") == ["well", "known", "2", "−", "3", "split"]


def test_the_cache_embeds_the_prompt_as_the_guard_reads_it():
    assert float(embed([("user", "What is 17 plus 5?")]) @ embed([("user", "What is 17 + 5?")])) == \
        pytest.approx(1.0, abs=1e-5)
    assert float(embed([("user", "What is 17 plus 5?")]) @ embed([("user", "What is 17 times 5?")])) < 0.999


def test_roles_are_part_of_the_fingerprint():
    assert fingerprint([("system", "Answer in French."), ("user", "Hello")]) != \
        fingerprint([("user", "Answer in French."), ("user", "Hello")])
    assert answer_bearing("I don't know 3.5") == ["not", "3.5"]


def _vec(*values) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_the_index_serves_only_a_prompts_own_bucket_best_first_and_clears_by_tier():
    index = SemanticIndex()
    index.add("t:a", "b1", "k1", _vec(1, 0), "small", 10, 1 << 20)
    index.add("t:a", "b1", "k2", _vec(1, 1), "large", 10, 1 << 20)
    index.add("t:a", "b2", "k3", _vec(1, 0), "small", 10, 1 << 20)
    index.add("t:b", "b1", "k4", _vec(1, 0), "small", 10, 1 << 20)
    found = index.nearest("t:a", "b1", _vec(1, 0), 4)
    assert [k for _, k in found] == ["k1", "k2"] and found[0][0] == pytest.approx(1.0)
    assert index.nearest("t:c", "b1", _vec(1, 0), 4) == []
    assert index.clear("t:a", "small") == 2 and [k for _, k in index.nearest("t:a", "b1", _vec(1, 0), 4)] == ["k2"]
    assert index.used("t:b")[0] == 1  # another scope untouched


def test_the_index_is_bounded_by_count_and_bytes_least_recently_used_out():
    index = SemanticIndex()
    for i in range(5):
        index.add("t:a", "b", f"k{i}", _vec(1, i), "small", 3, 1 << 20)
        if i == 2:
            index.touch("t:a", "k0")
    assert index.used("t:a")[0] == 3
    assert {k for _, k in index.nearest("t:a", "b", _vec(1, 0), 10)} == {"k0", "k3", "k4"}
    one = index.used("t:a")[1] // 3
    assert index.add("t:a", "b", "k5", _vec(1, 5), "small", 100, 2 * one) == 2  # the bytes bound: two out
    assert index.used("t:a") == (2, 2 * one)
    assert index.add("t:a", "b", "k6", _vec(1, 6), "small", 100, 10) == 0  # larger than the quota: not kept
    assert index.used("t:a") == (2, 2 * one)


def test_failed_samples_raise_the_bar_and_passes_bring_it_back():
    policy = SemanticCachePolicy(enabled=True, min_similarity=0.8, failure_step=0.1, window=3)
    bar = SimilarityBar()
    assert bar.needed("acme", policy) == pytest.approx(0.8)
    bar.record("acme", False, policy.window)
    bar.record("acme", False, policy.window)
    assert bar.needed("acme", policy) == pytest.approx(1.0) and bar.needed("globex", policy) == pytest.approx(0.8)
    bar.record("acme", False, policy.window)
    assert bar.needed("acme", policy) > 1.0  # no semantic hit is served
    for _ in range(3):
        bar.record("acme", True, policy.window)
    assert bar.needed("acme", policy) == pytest.approx(0.8)


def test_only_plain_text_prompts_of_bounded_length_are_compared():
    assert prompt_turns("chat", {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}) == \
        [("user", "hi")]
    assert prompt_turns("chat", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}) is None
    assert prompt_turns("chat", {"messages": [{"role": "assistant", "content": None, "tool_calls": []}]}) is None
    assert prompt_turns("chat", {"messages": [{"role": "user", "content": "x" * (MAX_PROMPT_CHARS + 1)}]}) is None
    assert prompt_turns("chat", {"messages": [{"role": "user", "name": "ada", "content": "hi"}]}) == [("user:ada", "hi")]
    assert prompt_turns("completion", {"prompt": ["a", "b"]}) is None
    assert prompt_turns("completion", {"prompt": "a"}) == [("prompt", "a")]
