"""CLI round trip on a small dataset: train -> predict -> evaluate -> calibrate, in a temp dir."""
import json
import subprocess
import sys

import pytest

from classifier.dataset import PACKAGED_DATA_DIR

pytestmark = pytest.mark.live  # runs `python -m classifier`


def _cli(*args, check=True):
    out = subprocess.run([sys.executable, "-m", "classifier", *args], capture_output=True, text=True,
                         timeout=120, check=False)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def test_train_predict_round_trip(tmp_path, splits):
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "train.jsonl", splits["train"][::16])
    _write(data / "validation.jsonl", splits["validation"][::6])
    _write(data / "test.jsonl", splits["test"][::6])
    feedback = tmp_path / "feedback.jsonl"
    _write(feedback, [{"prompt": "Prove the four colour theorem for planar maps formally.", "tier": 4}] * 3)
    model = tmp_path / "model"
    train = _cli("train", "--data", str(data), "--out", str(model), "--feedback", str(feedback))
    report = json.loads(train.stdout.strip().splitlines()[-1])
    assert {"validation", "test"} <= set(report) and report["test"]["macro_f1"] > 0.5
    assert "calibrating" in train.stderr  # progress lines go to stderr
    meta = json.loads((model / "metadata.json").read_text())
    assert meta["training"]["feedback_rows"] == 3 and meta["calibration"]["target"] == {"macro_f1": "max", "max_under_routing": 0.02}

    pred = json.loads(_cli("predict", "--model", str(model), "--prompt", "hi").stdout)
    assert pred["version"] == meta["version"] and pred["predictions"][0]["tier"] in (1, 2, 3, 4)
    msgs = json.dumps([{"role": "user", "content": "Thanks!"}])
    assert len(json.loads(_cli("predict", "--model", str(model), "--messages", msgs).stdout)["predictions"]) == 1

    evaluated = json.loads(_cli("evaluate", "--model", str(model), "--data", str(data / "test.jsonl")).stdout)
    assert evaluated["data"]["rows"] == len(splits["test"][::6])

    recal = tmp_path / "recal"
    cal = json.loads(_cli("calibrate", "--model", str(model), "--data", str(data / "test.jsonl"),
                          "--shares", "0.25,0.25,0.25,0.25", "--out", str(recal)).stdout)
    assert json.loads((recal / "metadata.json").read_text())["thresholds"] == {k: v for k, v in cal["thresholds"].items()}


def test_bad_input_is_a_clean_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "hi", "tier": 7}\n')
    out = _cli("train", "--data", str(bad), "--out", str(tmp_path / "m"), check=False)
    assert out.returncode == 2 and "tier" in out.stderr and "Traceback" not in out.stderr
    out = _cli("predict", "--model", str(PACKAGED_DATA_DIR / "missing"), "--prompt", "x", check=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr
