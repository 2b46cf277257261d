"""The held-out-author set and the checkable questions keep their format and balance."""
import collections
import json
import pathlib

import pytest

DATA = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "data"
ROLES = {"system", "user", "assistant"}


def _rows(name):
    with open(DATA / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def heldout():
    return _rows("heldout_authors.jsonl")


@pytest.fixture(scope="module")
def questions():
    return _rows("checkable_questions.jsonl")


def test_heldout_rows_are_well_formed(heldout):
    assert len(heldout) >= 800
    for row in heldout:
        assert set(row) == {"id", "tier", "style", "messages"}, row["id"]
        assert row["tier"] in (1, 2, 3, 4)
        assert isinstance(row["style"], str) and 0 < len(row["style"]) <= 40
        messages = row["messages"]
        assert messages and messages[-1]["role"] == "user", row["id"]
        for m in messages:
            assert m["role"] in ROLES and isinstance(m["content"], str) and m["content"].strip()


def test_heldout_ids_and_prompts_are_unique(heldout):
    ids = [r["id"] for r in heldout]
    assert len(set(ids)) == len(ids)
    conversations = [json.dumps(r["messages"], sort_keys=True) for r in heldout]
    assert len(set(conversations)) == len(conversations)


def test_heldout_tiers_are_balanced(heldout):
    counts = collections.Counter(r["tier"] for r in heldout)
    for tier in (1, 2, 3, 4):
        assert 0.20 <= counts[tier] / len(heldout) <= 0.30, counts


def test_questions_are_well_formed_and_unique(questions):
    assert len(questions) >= 300
    ids = [q["id"] for q in questions]
    assert len(set(ids)) == len(ids)
    assert len({q["prompt"] for q in questions}) == len(questions)
    for q in questions:
        assert set(q) == {"id", "tier", "prompt", "answer", "accept"}, q["id"]
        assert q["tier"] in (1, 2, 3, 4)
        assert q["prompt"].strip() and q["answer"].strip()
        assert q["accept"] and all(a == a.lower() and a.strip() for a in q["accept"]), q["id"]
        assert q["answer"].lower() in q["accept"], q["id"]
