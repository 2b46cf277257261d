"""The replay, on outcomes small enough to work out by hand, and `python -m classifier replay`."""
import json
import subprocess
import sys

import numpy as np
import pytest

from classifier.outcome_model import known_levels
from classifier.replay import Outcomes, no_worse, random_report, report

# four requests, two tiers (levels 1 and 4) costing 1 and 10 each; r1 and r3 need the top tier
KNOWN = np.stack([known_levels(o) for o in ({1: True}, {1: False, 4: True}, {1: True}, {1: False, 4: True})])
DATA = Outcomes(KNOWN, np.tile([1.0, 5.0, 5.0, 10.0], (4, 1)), np.array([1, 4]))


def _p_good(p1):
    return np.array([[p, p, p, 1.0] for p in p1])


def test_a_router_that_ranks_the_hard_ones_first():
    r = report(_p_good([0.9, 0.2, 0.6, 0.4]), DATA, [0.5, 0.5, 0.5])
    # at 0.5, P(level >= 2) = 1 - p1 clears it for r1 (0.8) and r3 (0.6): both to level 4
    assert r["tier_mix"] == {"1": 0.5, "4": 0.5}
    assert r["quality"] == 1.0 and r["cost_vs_top"] == pytest.approx(22 / 40)
    # the sweep sends r1, then r3, then r2, then r0 up: (cost 4, q .5) (13, .75) (22, 1) (31, 1) (40, 1);
    # normalised cost (c - 4) / 36 gives recovered 0 below .25, .5 below .5, then 1: area .625
    assert r["apgr"] == pytest.approx(0.625)
    assert r["strong_share_for_95pct"] == 0.5 and r["savings_at_95pct"] == pytest.approx(1 - 22 / 40)


def test_random_mixes_the_cheapest_and_top_tiers_to_reach_the_target():
    r = random_report(DATA)
    # quality .5 alone, 1.0 at the top: 95% needs 90% sent up, costing .1 * 4 + .9 * 40 of 40
    assert r["strong_share_for_95pct"] == pytest.approx(0.9) and r["quality"] == pytest.approx(0.95)
    assert r["savings_at_95pct"] == pytest.approx(1 - 36.4 / 40) and r["apgr"] == 0.5


def test_the_guard_refuses_a_router_that_ranks_worse():
    good = report(_p_good([0.9, 0.2, 0.6, 0.4]), DATA, [0.5] * 3)
    worse = report(_p_good([0.2, 0.9, 0.4, 0.6]), DATA, [0.5] * 3)  # r0 first, r1 last: all four to reach .95
    assert worse["savings_at_95pct"] == 0.0
    assert not no_worse(worse, good) and no_worse(good, worse) and no_worse(good, good)


def test_outcomes_need_two_levels():
    with pytest.raises(ValueError, match="two tier levels"):
        Outcomes(KNOWN, np.ones((4, 4)), np.array([1]))


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "classifier", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.live  # runs `python -m classifier`
def test_replay_cli_compares_serving_candidate_and_random(tmp_path):
    lines = [{"prompt": "Say hello.", "outcomes": {"1": True, "4": True}},
             {"prompt": "Prove rigorously that there are infinitely many primes.", "outcomes": {"1": False, "4": True}},
             {"messages": [{"role": "user", "content": "Name a fruit."}], "outcomes": {"1": True}},
             {"prompt": "Design a replicated log with failure modes analysis.", "outcomes": {"1": False, "4": False}}]
    path = tmp_path / "outcomes.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = _cli("replay", "--outcomes", str(path), "--candidate", str(tmp_path.parent / "missing"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    from classifier.runtime import PACKAGED_MODEL_DIR
    out = _cli("replay", "--outcomes", str(path), "--candidate", str(PACKAGED_MODEL_DIR), "--quality-target", "0.5")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["rows"] == 4 and r["levels_in_play"] == [1, 4] and r["candidate_no_worse"] is True
    assert r["serving"]["tier_mix"] == {"1": 0.5, "4": 0.5} and r["serving"]["quality"] == 0.75
    assert r["random"]["strong_share_for_95pct"] == pytest.approx(0.85)  # (.95 * .75 - .5) / (.75 - .5)

    path.write_text(json.dumps({"prompt": "hi", "outcomes": {"1": True}}) + "\n")
    out = _cli("replay", "--outcomes", str(path))
    assert out.returncode == 2 and "two tier levels" in out.stderr
