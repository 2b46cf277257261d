"""Outcome lines -> labels, `train --outcomes` round trip, `predict --data` line format."""
import json
import subprocess
import sys

import pytest

from classifier.outcomes import label_for, read_outcomes

TEACH = "quokka ledger reconciliation for the zebra fund"


def _cli(*args):
    out = subprocess.run([sys.executable, "-m", "classifier", *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize("levels, label", [
    ({1: True}, 1), ({1: True, 4: True}, 1), ({1: False, 4: True}, 4), ({2: False, 3: True}, 3),
    ({1: False}, 2), ({1: False, 4: False}, 4), ({4: True}, None), ({2: True}, None),
])
def test_label_is_the_cheapest_level_known_to_be_enough(levels, label):
    assert label_for(levels) == label


@pytest.mark.live  # runs `python -m classifier`
def test_bad_outcome_lines_are_rejected(tmp_path):
    bad = _write(tmp_path / "bad.jsonl", [{"prompt": "hi", "outcomes": {"5": True}}])
    with pytest.raises(ValueError, match="tier levels"):
        read_outcomes(bad)
    out = subprocess.run([sys.executable, "-m", "classifier", "train", "--outcomes", bad, "--out",
                          str(tmp_path / "m")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr


@pytest.mark.live  # runs `python -m classifier`
def test_train_on_outcomes_moves_the_router(tmp_path, splits):
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "train.jsonl", splits["train"][::12])
    _write(data / "validation.jsonl", splits["validation"][::6])
    variants = [f"{TEACH} {i}" for i in range(30)]
    outcomes = _write(tmp_path / "outcomes.jsonl",
                      [{"prompt": v, "outcomes": {"1": False, "4": True}} for v in variants]
                      + [{"prompt": "x", "outcomes": {"3": True}}])  # uninformative: skipped
    requests = _write(tmp_path / "requests.jsonl", [{"prompt": TEACH}, {"messages": [{"role": "user", "content": "hi"}]}])

    _cli("train", "--data", str(data), "--out", str(tmp_path / "before"))
    _cli("train", "--data", str(data), "--out", str(tmp_path / "after"), "--outcomes", outcomes)
    meta = json.loads((tmp_path / "after" / "metadata.json").read_text())
    assert meta["training"]["outcome_files"][0]["rows"] == 30
    assert meta["training"]["outcome_files"][0]["skipped_uninformative"] == 1

    lines = {}
    for name in ("before", "after"):
        out = _cli("predict", "--model", str(tmp_path / name), "--data", requests).strip().splitlines()
        lines[name] = [json.loads(line) for line in out]
        assert len(lines[name]) == 2
        for line in lines[name]:
            assert set(line) == {"tier", "scores", "p_good", "need"} and line["tier"] in (1, 2, 3, 4)
            assert len(line["scores"]) == 4 and sum(line["scores"]) == pytest.approx(1, abs=1e-4)
            # scores rank by the need of a higher tier: P(level >= 2) is the gain forgone at level 1
            assert sum(line["scores"][1:]) == pytest.approx(line["need"]["1"], abs=1e-5)
    # the taught request now looks harder; the unrelated one keeps its tier
    assert lines["after"][0]["scores"][3] > lines["before"][0]["scores"][3] + 0.2
    assert lines["after"][0]["tier"] >= 3
    assert lines["after"][1]["tier"] == lines["before"][1]["tier"] == 1
