"""The MiniLM ONNX export (`make setup`) is atomic and quiet: two processes exporting into the
same folder at once both end with one whole model, no partial file, and no tracer warnings."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnxruntime as ort
import pytest

pytestmark = pytest.mark.live  # exports from processes of its own, side by side

ROOT = Path(__file__).parents[2]


def test_concurrent_exports_leave_one_whole_model_and_print_no_warnings(tmp_path):
    code = f"from pathlib import Path; from classifier.embeddings import export_onnx; export_onnx(Path({str(tmp_path)!r}))"
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
           "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert all(out == "" and err == "" for out, err in outputs), outputs  # no TracerWarning, no progress bar
    assert [p.name for p in tmp_path.iterdir()] == ["minilm.onnx"]
    session = ort.InferenceSession(str(tmp_path / "minilm.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["input_ids", "attention_mask", "token_type_ids"]
