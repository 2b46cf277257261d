"""The held-out-author set shares no prompt with any split we train, calibrate or test on.

Compared after normalising case, punctuation and spacing. The held-out task (last user turn,
the one the tier is about) must match none of our user turns: a task that also sits in training,
in any surface form, would inflate the benchmark's scores. Openers of multi-turn held-out rows
("hi") are not tasks and may repeat.
"""
import json
import pathlib
import re

from classifier.dataset import SPLITS

HELDOUT_AUTHORS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "heldout_authors.jsonl"


def normalised(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def user_turns(row: dict) -> list[str]:
    if "prompt" in row:
        return [row["prompt"]]
    return [m["content"] for m in row["messages"] if m["role"] == "user"]


def test_normalised_matches_ignore_case_and_punctuation():
    assert normalised("Design  YouTube!") == normalised("design youtube") != normalised("design you tube")


def test_no_heldout_author_prompt_appears_in_any_split(splits):
    assert set(splits) == set(SPLITS)
    ours = {normalised(t) for rows in splits.values() for row in rows for t in user_turns(row)}
    with open(HELDOUT_AUTHORS, encoding="utf-8") as fh:
        held = [json.loads(line) for line in fh if line.strip()]
    leaked = [(row["id"], user_turns(row)[-1]) for row in held if normalised(user_turns(row)[-1]) in ours]
    assert leaked == []
