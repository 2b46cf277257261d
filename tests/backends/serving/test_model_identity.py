"""The identity a worker states in its /v1/models card: a digest of the model folder's files that
changes with any byte of the weights, config or tokenizer, is remembered per file size and mtime,
and comes with the engine settings that change the model's numbers."""
from __future__ import annotations

import os

from backends.engine.config import EngineConfig
from backends.serving.model_identity import files_digest, model_identity


def _folder(tmp_path, weights: bytes):
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "notes.txt").write_text("not a model file")
    return folder


def test_the_digest_follows_the_weights_and_is_remembered(tmp_path, monkeypatch):
    monkeypatch.setenv("TIERGATE_CACHE", str(tmp_path / "cache"))
    folder = _folder(tmp_path, b"\x00" * 4096)
    first = files_digest(folder)
    assert len(first) == 64 and files_digest(folder) == first
    assert len(list((tmp_path / "cache" / "model-digests").iterdir())) == 1
    (folder / "notes.txt").write_text("edited")  # not a file the model reads
    assert files_digest(folder) == first
    weights = folder / "model.safetensors"
    weights.write_bytes(b"\x00" * 4095 + b"\x01")  # one byte of other weights
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 1_000_000))
    assert files_digest(folder) != first


def test_the_identity_names_the_model_its_weights_and_numeric_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("TIERGATE_CACHE", str(tmp_path / "cache"))
    folder = _folder(tmp_path, b"\x02" * 1024)
    identity = model_identity(EngineConfig(model=str(folder), device="cpu", quantization="int8"), "served-name")
    assert identity["model"] == "served-name" and identity["weights_sha256"] == files_digest(folder)
    assert identity["settings"]["quantization"] == "int8" and identity["settings"]["device"] == "cpu"
    handed_in = model_identity(EngineConfig(model="not-a-folder", device="cpu"), "m")
    assert handed_in["weights_sha256"] is None  # a model handed in directly (tests) states no digest
