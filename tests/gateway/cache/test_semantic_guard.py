"""The semantic cache's parts on their own: the guard reads answer-bearing tokens over the whole
prompt in order, the index is bounded per scope by count and bytes, and sampled failures raise
the similarity a tenant's hit needs."""
from __future__ import annotations

import numpy as np
import pytest

from gateway.cache.answer_bearing import answer_bearing, fingerprint
from gateway.cache.prompt_text import MAX_PROMPT_CHARS, prompt_turns
from gateway.cache.semantic_index import SemanticIndex
from gateway.cache.similarity_bar import SimilarityBar
from policies.config import SemanticCachePolicy

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
])
def test_a_different_answer_bearing_token_anywhere_is_another_question(a, b):
    assert not same(a, b)


@pytest.mark.parametrize("a, b", [
    ("What is the capital of France?", "Please tell me the capital of France."),
    ("What's the population of Peru?", "Hi! Quick question. What is the population of Peru?"),
    ("What currency does Japan use?", "what currency does japan use ?"),
    ("Is 1,000 more than 999?", "Is 1000 more than 999?"),
])
def test_a_rewording_in_common_words_only_keeps_the_fingerprint(a, b):
    assert same(a, b)


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
